# bemore — the two Quick start commands are `make demo` and `make test`.
# Everything they need is set up here: a virtual environment in .venv with the declared Python
# dependencies, the Debian packages listed in tools/system-packages.txt, the firmware's host build.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test bench lint sysdeps firmware venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m bemore.warmup
	touch $(STAMP)

sysdeps:
	@sh tools/install-system-packages.sh tools/system-packages.txt

firmware: sysdeps
	@if [ -f firmware/Makefile ]; then $(MAKE) --no-print-directory -C firmware; fi

## The main job, end to end on the bundled sample (grows as capabilities land).
demo: sysdeps venv firmware
	@sh tools/demo.sh

## The whole test suite (what CI runs).
test: sysdeps venv
	$(BIN)/python -m pytest

## Every benchmark (prints bemore's figure next to a baseline measured in the same run).
bench: venv firmware
	$(BIN)/python -m bench

lint: venv
	$(BIN)/ruff check bemore controller bench tests

clean:
	rm -rf $(VENV) out
	@if [ -f firmware/Makefile ]; then $(MAKE) --no-print-directory -C firmware clean; fi
