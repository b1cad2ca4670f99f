# voxproxy: the two commands of the README, and a few helpers.
#   make demo   install into .venv and run the main job (mock agent + proxy + scripted calls)
#   make test   install into .venv and run the whole suite (pytest, ruff, mypy --strict)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench clean fixtures

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/voxproxy demo

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check voxproxy tests benchmarks tools
	$(BIN)/ruff format --check voxproxy tests benchmarks tools

typecheck: $(STAMP)
	$(BIN)/mypy --strict voxproxy

pytest: $(STAMP)
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/overhead.py

fixtures: $(STAMP)
	$(BIN)/python tools/make_fixtures.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
