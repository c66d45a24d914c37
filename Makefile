# Two commands do all the set-up: `make test` and `make reproduce` (each creates .venv on first use).
PYTHON  ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
PROFILE ?= cpu
NOTEBOOKS ?=
PINS    ?= requirements.txt
KERNEL  := repro_lib
STAMP   := $(VENV)/.installed-$(notdir $(PINS))

.PHONY: test reproduce report site lab venv clean-results data

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.txt requirements-nopins.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -r $(PINS) -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (repro_lib)" >/dev/null
	touch $@

## test: create the venv if missing, install pinned deps, run the test suite (notebooks in the smoke profile) on
## every core (pytest-xdist; a file sharing a module-scoped fixture on one worker), then the 15 slowest tests
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --durations=15 tests

## reproduce: execute every notebook (or NOTEBOOKS="name …") with PROFILE (smoke|cpu|gpu|paper) into
## results/$(PROFILE)/; ARGS for extra -p. A failing notebook does not stop the others; a table at the end.
reproduce: $(STAMP)
	$(BIN)/python -m repro_lib run --profile $(PROFILE) $(NOTEBOOKS) $(ARGS)

## data: build the CIFAR-10 JPEG stand-in the published cpu records trained on into $(DATA_ROOT)/cifar10-jpeg from
## CIFAR-10 (downloaded with torchvision, MD5-checked, when missing), then compare it with the published folder
## (DATA_ROOT: $REPRO_DATA_ROOT if set, else data)
DATA_ROOT ?= $(or $(REPRO_DATA_ROOT),data)
data: $(STAMP)
	$(BIN)/python -m repro_lib data cifar10-jpeg --root $(DATA_ROOT)

## report: re-render the published notebooks in reports/ from the committed run store (nothing trains) and the
## README's results table
report: $(STAMP)
	$(BIN)/python -m repro_lib report reports $(NOTEBOOKS)

## site: the published notebooks (reports/) as one static website in site/ (nothing is executed; open
## site/index.html from disk or serve the folder)
site: $(STAMP)
	$(BIN)/python -m repro_lib site reports --out site

## lab: JupyterLab with the repro_lib kernel, rooted at the repository (notebooks work in it: same data/ and
## results/ as `make reproduce`); as root (containers, cloud GPU machines) with --allow-root
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) --FileContentsManager.preferred_dir=notebooks $(ALLOW_ROOT)

clean-results:
	rm -rf results
