# The book and its package. `make book` and `make test` are all a newcomer needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JB     := $(VENV)/bin/jupyter-book build . -W -n --keep-going
# Pin the number of CPU threads so float results (and stored outputs) match across machines.
export OMP_NUM_THREADS ?= 2
export MKL_NUM_THREADS ?= 2
export PYDEVD_DISABLE_FILE_VALIDATION = 1

.PHONY: book test lint unit nbval nbval-native build-check browser js-assets notebooks clean

# Create .venv when missing; reinstall when the requirements or the package metadata change.
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 > /dev/null
	touch $(STAMP)

## make book: build the HTML book into _build/html (renders the stored notebook outputs)
book: $(STAMP)
	$(JB)

## make test: lint, unit tests, strict nbval over every chapter as another CPU would run it,
## the book build (-W) with its widget-state check, and the built pages in Chromium
test: $(STAMP) lint unit nbval build-check browser

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks book

unit: $(STAMP)
	$(PY) -m pytest tests --ignore=tests/browser

NBVAL := $(PY) -m pytest --nbval book --nbval-current-env \
	--nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider

## strict nbval with ATen's and MKL's other code paths: float results move in their last digits
## as on a CPU of another kind (AVX2, AVX-512, ARM), so this proves the compared outputs do not
## depend on the CPU that recorded them
nbval: $(STAMP)
	ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE $(NBVAL)

## strict nbval on this machine's own code paths
nbval-native: $(STAMP)
	$(NBVAL)

build-check: $(STAMP)
	rm -rf _build/html _build/.doctrees
	$(JB)
	$(PY) tests/check_built_book.py _build/html

## the built book in headless Chromium (skipped, saying why, without Chromium or the JS files)
browser: $(STAMP) js-assets
	$(PY) -m pytest tests/browser -rs -p no:cacheprovider

# The scripts the built pages load from CDNs, from the npm registry (for the browser test).
JS_DIR := .cache/js
js-assets: $(JS_DIR)/.done
$(JS_DIR)/.done:
	mkdir -p $(JS_DIR)
	cd $(JS_DIR) && if command -v npm > /dev/null && npm pack --silent requirejs@2.3.4 \
	    @jupyter-widgets/html-manager@1.0.6 mathjax@3.2.2 > /dev/null; then \
	  for p in requirejs html-manager mathjax; do \
	    rm -rf $$p && mkdir $$p && tar xzf *$$p-*.tgz -C $$p --strip-components=1; done; \
	  rm -f *.tgz && touch .done; \
	else echo "npm or the npm registry is not available: the browser test will be skipped"; fi

## make notebooks: re-execute every chapter in place, each in a fresh kernel, saving widget state;
## two runs on one machine write the same files (NB=book/11_masking.ipynb runs one chapter)
NB ?= book/[0-9]*.ipynb
notebooks: $(STAMP)
	$(PY) tests/execute_notebooks.py $(NB)

clean:
	rm -rf _build .cache test-artifacts
