# The README's two set-up commands are `make demo` and `make test`; both build the
# virtual environment first if it is missing or out of date.
PYTHON  ?= python3
VENV    ?= .venv
# The CPU wheel of PyTorch. GPU users: `make TORCH_SPEC=torch demo` (or any torch>=2.4).
TORCH_SPEC ?= torch==2.13.0
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.attnlab-installed
# The installer: pip by default. `make USE_UV=1 …` uses uv (PyPI package `uv`, a resolver and
# installer written in Rust) where it is on PATH, else puts it into the new venv with pip, and falls
# back to pip if it fails. Not the default: uv reads neither pip.conf nor PIP_FIND_LINKS, so on a
# machine whose CPU wheel of PyTorch comes from a local find-links folder or extra index (this
# project's machines) it would resolve another build from PyPI; its gain here is unmeasured.
UV      ?= $(shell command -v uv 2>/dev/null)
USE_UV  ?= 0
# The default test run's workers (pytest-xdist): one per core; WORKERS=0 runs in this process.
WORKERS ?= auto

NB_STAMP := $(VENV)/.attnlab-notebooks-installed
# The package and PyTorch alone: all `make demo` needs (the test extras, transformers and
# Playwright among them, come with $(STAMP)).
BASE_STAMP := $(VENV)/.attnlab-base-installed
TEST_SPEC  := .[test,lint]

# $(call install,ARGS): `pip install ARGS` into the venv, by uv where it works, else by pip.
define install
	@uv="$(UV)"; \
	if [ "$(USE_UV)" = 1 ] && [ -z "$$uv" ] && [ -x "$(BIN)/uv" ]; then uv="$(BIN)/uv"; fi; \
	if [ "$(USE_UV)" = 1 ] && [ -z "$$uv" ] && $(BIN)/python -m pip install --quiet uv >/dev/null 2>&1; then uv="$(BIN)/uv"; fi; \
	if [ "$(USE_UV)" = 1 ] && [ -n "$$uv" ] && "$$uv" pip install --quiet --python "$(BIN)/python" $(1); then \
	  echo "installed with $$uv"; \
	else \
	  echo "installing with pip"; \
	  $(BIN)/python -m pip install --quiet $(1); \
	fi
endef

.PHONY: venv demo models test test-slow test-browser test-site test-notebooks notebooks lab lint lint-js js-packages format bench screenshots clean site

venv: $(STAMP)

$(BASE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(call install,"$(TORCH_SPEC)" -e .)
	touch $(BASE_STAMP)

$(STAMP): $(BASE_STAMP)
	$(call install,"$(TORCH_SPEC)" -e "$(TEST_SPEC)")
	touch $(STAMP)

# The main job: trains a small translator on data the package generates itself.
demo: $(BASE_STAMP)
	$(BIN)/attnlab demo

# The models shipped in attnlab/assets (their builds: attnlab/build_assets/, BUILDS in driver.py):
# trains each with its ordinary command, packs it (fp16; int8 rows for ja-en and en-ja) and writes
# its model card. Corpora are read from DATA; ONLY=NAME... builds some; FROM_RUN=DIR (with
# ONLY=NAME) packs a run already trained, e.g. `make models ONLY=ja-en FROM_RUN=runs/ja-en`.
DATA     ?= ../shared/data
ONLY     ?=
FROM_RUN ?=
models: $(STAMP)
	$(BIN)/python -m attnlab.build_assets --data "$(DATA)" $(if $(ONLY),--only $(ONLY)) $(if $(FROM_RUN),--from-run "$(FROM_RUN)")

# The default test run (slow, browser and notebook runs excluded; see the targets below), on every
# core (pytest-xdist; a test file's tests stay together in one worker, so its module fixtures are
# built once). The engine's lines are the defaults and precision "auto" is fp32 (tests/conftest.py).
test: $(STAMP) js-packages
	$(BIN)/python -m pytest -q --durations=10 -m "not slow and not browser and not notebooks" $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadfile)

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m "slow"

# BROWSER_WORKERS=N runs N pytest-xdist workers, each test file in one (0: none, one browser at a time).
BROWSER_WORKERS ?= 2
test-browser: $(STAMP) js-packages
	$(BIN)/python -m pytest -q --durations=10 -m "browser" $(if $(filter 0,$(BROWSER_WORKERS)),,-n $(BROWSER_WORKERS) --dist loadfile)

# The lesson's browser tests against the static build (docs/site.md, "Testing against the static
# build"): the site built into a temporary folder (removed after), served by a plain static server
# (Python's http.server), every browser test of the lesson's pages run on it (the tests of the
# explorer's own server skip, saying why; tests that serve their own folder are deselected).
# SITE_WORKERS=N runs N pytest-xdist workers (a test file's tests stay together; 0: none).
SITE_WORKERS ?= 2
test-site: $(STAMP) js-packages
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(BIN)/attnlab lesson build-site --out "$$tmp/site" && \
	ATTNLAB_TEST_SITE=static ATTNLAB_TEST_SITE_DIR="$$tmp/site" $(BIN)/python -m pytest -q --durations=10 -m "browser" \
		$(if $(filter 0,$(SITE_WORKERS)),,-n $(SITE_WORKERS) --dist loadfile)

# The notebooks (notebooks/NN_*.py, jupytext percent format) need the extra `.[notebooks]`.
$(NB_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[notebooks]"
	touch $(NB_STAMP)

# Every notebook executed top to bottom in a Jupyter kernel, in order; the executed copies and the
# time each took go to build/notebooks/.
test-notebooks: $(NB_STAMP)
	$(BIN)/python -m pytest -q -m "notebooks" tests/notebooks/test_notebooks.py --durations=0

# notebooks/NN_*.ipynb, built from the .py sources and executed (they are git-ignored).
notebooks: $(NB_STAMP)
	$(BIN)/python notebooks/build.py

# JupyterLab on the notebooks (converted where missing or older than their source; outputs of
# `make notebooks` are kept).
lab: $(NB_STAMP)
	$(BIN)/python -m pip install --quiet -e ".[lab]"
	$(BIN)/python notebooks/build.py --no-execute
	$(BIN)/jupyter lab notebooks

# Style (ruff check), formatting (ruff format --check) and the import layers (import-linter,
# contracts in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check attnlab tests benchmarks examples docs/screenshots.py
	$(BIN)/ruff format --check attnlab tests benchmarks examples docs/screenshots.py
	$(BIN)/lint-imports
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory lint-js; \
	else echo "lint: npm is not on PATH, so the JavaScript lint (make lint-js) was skipped"; fi

# The JavaScript's packages (package.json; the versions pinned in package-lock.json): installed by
# `npm ci` when node_modules is missing or older than the lock file.
node_modules/.attnlab-installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# The JavaScript packages where npm is on PATH (the tests of the in-page engine run onnxruntime-web
# from node_modules); without npm, or when `npm ci` fails (no network), those tests skip, saying so.
js-packages:
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory node_modules/.attnlab-installed \
	|| echo "npm ci failed (no network?): the in-page engine's tests that need onnxruntime-web will skip"; \
	else echo "npm is not on PATH: the in-page engine's tests that need onnxruntime-web will skip"; fi

# ESLint (eslint.config.js) over the explorer's and the lesson's JavaScript and the engine's
# parity scripts.
lint-js: node_modules/.attnlab-installed
	npx --no-install eslint attnlab/web/static tests/js eslint.config.js

format: $(STAMP)
	$(BIN)/ruff check --fix attnlab tests benchmarks examples docs/screenshots.py
	$(BIN)/ruff format attnlab tests benchmarks examples docs/screenshots.py

# The whole lesson as a static site (docs/site.md): a folder any web host serves, the models running
# in the learner's browser. Needs the venv (with its web and site extras) and npm's onnxruntime-web; SITE=DIR
# writes another folder (replaced if it exists).
SITE ?= build/site
site: $(STAMP) js-packages
	$(BIN)/attnlab lesson build-site --out "$(SITE)" --force

bench: $(STAMP)
	$(BIN)/python benchmarks/attention.py

# The README's screenshots of the lesson (docs/img/lesson-{3-qkv,7-transformer,8-pooling}{,-ja}.png),
# taken in Chromium from the explorer with the shipped models; see docs/screenshots.py.
screenshots: $(STAMP)
	$(BIN)/python docs/screenshots.py

clean:
	rm -rf $(VENV) build dist *.egg-info
