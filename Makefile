# voxproxy: the two commands of the README, and a few helpers.
#   make demo   install into .venv and run the main job (mock agent + proxy + scripted calls)
#   make test   install into .venv (and the Debian packages a few tests drive: prometheus,
#               chromium, iproute2, util-linux) and run the whole suite (pytest, ruff, mypy --strict)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test system-deps lint typecheck pytest bench clean fixtures

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/voxproxy demo

test: $(STAMP) system-deps lint typecheck pytest

# Installs the missing Debian packages when root or password-less sudo may; otherwise
# stops at once and prints the one command to run.
system-deps:
	@tools/system-deps

lint: $(STAMP)
	$(BIN)/ruff check voxproxy tests benchmarks tools
	$(BIN)/ruff format --check voxproxy tests benchmarks tools

typecheck: $(STAMP)
	$(BIN)/mypy --strict voxproxy

pytest: $(STAMP) system-deps
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/overhead.py

fixtures: $(STAMP)
	$(BIN)/python tools/make_fixtures.py

# Regenerates fixtures/corpus (needs espeak-ng, flite, festival and its voices, sox:
# see fixtures/corpus/README.md). The output is committed; tests never run this.
.PHONY: corpus
corpus: $(STAMP)
	$(BIN)/python tools/make_corpus.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
