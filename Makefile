# voxproxy: the two commands of the README, and a few helpers.
#   make demo   install into .venv and run the main job (mock agent + proxy + scripted calls)
#   make test   install into .venv (and the Debian packages a few tests drive: prometheus,
#               chromium, iproute2, util-linux), compile the measurement core, and run the
#               whole suite (ruff, mypy --strict, pytest on the compiled build, then the
#               quick tests again on the pure-Python sources)
#   make native compile the measurement core with mypyc (voxproxy/native.py); a machine
#               without a C compiler keeps the pure-Python build

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: native native-sources demo test system-deps lint typecheck pytest pytest-pure bench clean fixtures clean-native

# The measurement core's compiled build: rebuilt when one of its sources changed (the
# modules voxproxy/native.py lists in NATIVE_MODULES, one "voxproxy.x.y", per line).
NATIVE_SOURCES := $(patsubst %,%.py,$(subst .,/,$(shell sed -n 's/^ *"\(voxproxy\.[a-z0-9_.]*\)",.*/\1/p' voxproxy/native.py)))
NATIVE_STAMP   := build/native/.built

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP) $(NATIVE_STAMP)
	$(BIN)/voxproxy demo

test: $(STAMP) system-deps lint typecheck pytest pytest-pure

$(NATIVE_STAMP): $(STAMP) $(NATIVE_SOURCES) voxproxy/native.py tools/build_native.py
	$(BIN)/python tools/build_native.py
	mkdir -p build/native && touch $(NATIVE_STAMP)

native: $(NATIVE_STAMP)

native-sources:
	@echo $(NATIVE_SOURCES)

clean-native:
	$(BIN)/python tools/build_native.py --clean

# Installs the missing Debian packages when root or password-less sudo may; otherwise
# stops at once and prints the one command to run.
system-deps:
	@tools/system-deps

lint: $(STAMP)
	$(BIN)/ruff check voxproxy tests benchmarks tools
	$(BIN)/ruff format --check voxproxy tests benchmarks tools

typecheck: $(STAMP)
	$(BIN)/mypy --strict voxproxy

# The suite runs in PYTEST_WORKERS processes (pytest-xdist; 0 runs it in this one). Most
# real-time tests wait on the wall clock, so two processes overlap their waits on two
# cores; every test binds port 0 and writes under its own tmp_path, and a test that must
# share a process with another says so with @pytest.mark.xdist_group (--dist loadgroup).
PYTEST_WORKERS ?= 2
PYTEST_XDIST   := -n $(PYTEST_WORKERS) --dist loadgroup

pytest: $(STAMP) system-deps $(NATIVE_STAMP)
	$(BIN)/pytest -q $(PYTEST_XDIST)

# The pure-Python fallback passes the same quick tests (the compiled build ran them all).
pytest-pure: $(STAMP)
	VOXPROXY_PURE_PYTHON=1 $(BIN)/pytest -q $(PYTEST_XDIST) -m "not slow"

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
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build/native
	find voxproxy -name '*.so' -delete
