# Ray LabKit. `make lab` and `make test` are the whole set-up on a fresh machine.
#   make test NB=01         unit tests + just notebook 01
#   make run NB=00 P="SIZE=smoke SEED=1"   papermill runs into runs/<time>/
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
NB     ?=
P      ?=
NOTEBOOKS := $(if $(NB),$(wildcard notebooks/$(NB)*.ipynb),notebooks)
# A per-cell guard against hangs (a few times a notebook's budget), not a speed test.
CELL_TIMEOUT ?= 600

.PHONY: install lab test test-exercises test-rerun exercises run lint strip clean doctor

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Ray LabKit needs Python >= 3.11"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lab: install
	$(VENV)/bin/labkit lab

test: install
	@test -n "$(NOTEBOOKS)" || { echo "no notebook matches NB=$(NB)"; exit 2; }
	LABKIT_SIZE=smoke LABKIT_RESULTS_DIR=runs/test RAY_ADDRESS= \
	  $(PY) -m pytest tests --nbmake $(NOTEBOOKS) --nbmake-timeout=$(CELL_TIMEOUT) \
	  --durations=0 --durations-min=1.0

# Learner copies in exercises/ (answers stubbed); `make lab` writes them too.
exercises: install
	$(VENV)/bin/labkit exercises

# Every learner copy executed: each must stop at its first check with "... is not set yet".
test-exercises: install
	LABKIT_SIZE=smoke LABKIT_RESULTS_DIR=runs/test-exercises RAY_ADDRESS= \
	  $(VENV)/bin/labkit exercises --run $(NB)

# Run All twice in one kernel (the first time without teardown), as a learner re-runs a lesson.
RERUN ?= 05 07 08 09
test-rerun: install
	LABKIT_SIZE=smoke LABKIT_RESULTS_DIR=runs/test-rerun RAY_ADDRESS= \
	  $(VENV)/bin/labkit rerun $(RERUN)

run: install
	$(VENV)/bin/labkit run $(NB) $(foreach kv,$(P),-p $(kv))

lint: install
	$(VENV)/bin/ruff check labkit tests notebooks

strip: install
	$(VENV)/bin/nbstripout --extra-keys "metadata.widgets cell.metadata.execution" notebooks/*.ipynb

doctor: install
	$(VENV)/bin/labkit doctor

clean: install
	$(VENV)/bin/labkit clean
