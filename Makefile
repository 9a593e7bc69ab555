# Ray LabKit. `make lab` and `make test` are the whole set-up on a fresh machine.
#   make test NB=01         unit tests + just notebook 01
#   make run NB=00 P="SIZE=smoke SEED=1"   papermill runs into runs/<time>/
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
NB     ?=
P      ?=
NOTEBOOKS := $(if $(NB),$(foreach n,$(NB),$(wildcard notebooks/$(n)*.ipynb)),notebooks)
# A per-cell guard against hangs (a few times a notebook's budget), not a speed test.
CELL_TIMEOUT ?= 600

.PHONY: install lab test test-unit test-journeys test-small bench test-cluster test-exercises test-rerun exercises run lint strip clean doctor prometheus tools site browser test-browser

# SLOW_IMPORT: every Ray process (driver, each worker, each actor) imports jsonschema, and
# jsonschema imports rfc3987-syntax when it is installed (JupyterLab's jupyter-events pulls it in
# through jsonschema[format-nongpl]); that module builds ~35 Earley parsers at import: `import ray`
# took 1.7 s with it and 0.45 s without on a 2-core box. Nothing in the kit checks IRI formats.
# `labkit doctor` says when it is back (conda users: pip uninstall rfc3987-syntax).
$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Ray LabKit needs Python >= 3.11"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	$(PY) -m pip uninstall --quiet --yes rfc3987-syntax  # see SLOW_IMPORT above
	touch $(STAMP)

install: $(STAMP)

# Lesson 10's real Prometheus: Debian's package unpacked into the git-ignored .tools/ with
# `apt-get download` + `dpkg -x`. Not `apt-get install`: that package starts a server and a node
# exporter on all interfaces. Nothing here is started; the lesson starts it on 127.0.0.1.
PROM := .tools/prometheus/usr/bin/prometheus
prometheus: $(PROM)

$(PROM):
	@command -v apt-get >/dev/null && command -v dpkg >/dev/null || { \
	  echo "make prometheus: needs apt-get and dpkg (Debian, Ubuntu); elsewhere put a prometheus"; \
	  echo "binary on PATH or in LABKIT_PROMETHEUS. Lesson 10 scrapes Ray directly without one."; \
	  exit 1; }
	rm -rf .tools/download && mkdir -p .tools/download
	cd .tools/download && { apt-get download prometheus 2>/dev/null || \
	  { apt-get update -qq && apt-get download prometheus; }; }
	dpkg -x .tools/download/prometheus_*.deb .tools/prometheus
	rm -rf .tools/download
	$(PROM) --version 2>&1 | head -1

# Optional tools, tried by `make lab` and `make test`: a failure leaves the lessons' fallbacks.
tools:
	@$(MAKE) --no-print-directory prometheus || echo "(no Prometheus: lesson 10 will scrape Ray directly)"

lab: install tools
	$(VENV)/bin/labkit lab

# LABKIT_LOGICAL_GPUS=1: every lesson in the shape of the most common GPU box, computed on the CPU.
# Each lesson runs through the kit's runner (tests/test_notebooks.py) into runs/test/<lesson>.ipynb,
# and then, in the same kernel, each exercise's learner cells: the stub, then the check, which
# must stop at once naming the missing answer. NB="01 06" runs those lessons (and the unit tests).
test: install tools
	@test -n "$(NOTEBOOKS)" || { echo "no notebook matches NB=$(NB)"; exit 2; }
	LABKIT_SIZE=smoke LABKIT_LOGICAL_GPUS=1 LABKIT_RESULTS_DIR=runs/test RAY_ADDRESS= \
	  LABKIT_NB="$(NB)" LABKIT_CELL_TIMEOUT=$(CELL_TIMEOUT) \
	  $(PY) -m pytest tests -m "not browser and not journey" --durations=0 --durations-min=1.0

# The fast tier: no notebook, no Ray, no server (markers in pyproject.toml; a test that starts
# Ray here fails and names the marker it lacks). Minutes, not half an hour.
test-unit: install
	LABKIT_TEST_TIER=unit LABKIT_SIZE=smoke RAY_ADDRESS= \
	  $(PY) -m pytest tests -m "not ray and not notebook and not network and not browser and not journey" -q --durations=5

# Users' journeys end to end (tests/test_journeys.py): a learner over two days in English and in
# Chinese (make lab from the README, an answer saved through JupyterLab, the lesson changed
# upstream), an instructor's two machines as the README's steps say (as root: two network
# namespaces) with every listening port checked against the README, a newcomer's make test-unit
# and labkit doctor on a fresh clone; then the day's notebook at SIZE=small (labkit small
# --rotation: a lesson the submission touches first, else each lesson and lab report in turn).
# REQUIRE_JOURNEYS=1 (CI) fails where a journey would skip (no root for namespaces).
test-journeys: install tools
	LABKIT_SIZE=smoke LABKIT_RESULTS_DIR=runs/test-journeys RAY_ADDRESS= LABKIT_LOGICAL_GPUS= \
	  LABKIT_REQUIRE_JOURNEYS=$(REQUIRE_JOURNEYS) \
	  $(PY) -m pytest tests/test_journeys.py -m journey -v -s --durations=0
	LABKIT_RESULTS_DIR=runs/test-small RAY_ADDRESS= LABKIT_LOGICAL_GPUS= \
	  $(VENV)/bin/labkit small --rotation

# Notebooks at SIZE=small, a learner's default: make test-small NB="10 12" (lab reports: lab_tasks).
test-small: install tools
	@test -n "$(NB)" || { echo 'make test-small: name the notebooks, NB="10 12"'; exit 2; }
	LABKIT_RESULTS_DIR=runs/test-small RAY_ADDRESS= LABKIT_LOGICAL_GPUS= \
	  $(VENV)/bin/labkit small $(NB)

# The lessons on a multi-node cluster (labkit/tools/clustercheck.py): a 0-CPU head and two worker nodes
# (1 CPU, 2 logical GPUs each; as root, each in a network namespace with a 198.18.x.x address),
# the joining lessons run with RAY_ADDRESS set (those the submission touches, then the day's share
# of the rest: 240 s by their headers), a local lesson checked to send the cluster nothing, the
# network-cut drill, then down and nothing left; then two learners (ana, ben) run 02 and 09 at once
# on a 4-CPU cluster of their own, and every app and named actor it saw must be one learner's
# (--no-pair skips them). NB="00 06" runs those lessons, NB=all every one.
test-cluster: install
	LABKIT_SIZE=smoke LABKIT_RESULTS_DIR=runs/test-cluster LABKIT_LOGICAL_GPUS= \
	  $(PY) -m labkit.tools.clustercheck $(NB)

# Learner copies in exercises/ (answers stubbed); `make lab` writes them too.
exercises: install
	$(VENV)/bin/labkit exercises

# The learner copies written and checked against their lessons (answers stubbed, checks guarded,
# all else kept): seconds. `make test` runs every stub and check in its lesson's kernel.
# RUN=1 also executes every copy (NB="01 06" those): each must stop at its first check.
test-exercises: install
	LABKIT_SIZE=smoke LABKIT_LOGICAL_GPUS=1 LABKIT_RESULTS_DIR=runs/test-exercises RAY_ADDRESS= \
	  $(VENV)/bin/labkit exercises --check $(if $(RUN),--run $(NB))

# Run All twice in one kernel (the first time without teardown), as a learner re-runs a lesson:
# the lesson of the day (each of 00-13 in turn, one per day of the year), then the lessons the
# submission touches (their notebook, or a labkit module they reach, changed in the commits
# within 3 h of HEAD, or after RERUN_BASE) while 1.5 x their header's smoke time fits in 300 s;
# the log names what it runs and what it leaves out. RERUN=all runs every lesson twice;
# RERUN="05 09" those two as well. Without LABKIT_LOGICAL_GPUS, unlike `make test`.
RERUN ?=
test-rerun: install
	LABKIT_SIZE=smoke LABKIT_RESULTS_DIR=runs/test-rerun RAY_ADDRESS= LABKIT_LOGICAL_GPUS= \
	  $(VENV)/bin/labkit rerun $(RERUN) $(if $(filter all,$(RERUN)),,--rotation --touched)

# The workbook as a static site (labkit/tools/site.py): Sphinx + MyST-NB over notebooks a run
# already executed (never executing them), into runs/site/ and runs/site.tar.gz. RUN=runs/<folder>
# builds it from a `labkit run` or a `labkit gpu-check` run instead of make test's. ANSWERS=1 shows
# the answers open, for instructors. It fails, naming the page, on an error output outside a
# blog-error cell, a broken link or anchor, an image without alt text, a lesson the index lacks,
# anything on another host, or a path outside the repository in a README.
site: install
	$(VENV)/bin/labkit site --run $(or $(RUN),runs/test) --pack runs/site.tar.gz $(if $(ANSWERS),--answers)

# Debian's chromium and chromium-driver, from one source so their versions match; only when
# missing (a fresh machine has neither). Needs apt-get, and root or sudo.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then \
	  chromium --version; chromedriver --version; exit 0; fi; \
	command -v apt-get >/dev/null || { echo "make browser: needs Debian's apt-get (Ubuntu's chromium is a snap stub);" \
	  "elsewhere install Chromium and a matching chromedriver on PATH"; exit 1; }; \
	SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	$$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver; }; \
	chromium --version; chromedriver --version

# JupyterLab, the dashboard and the site in headless Chromium (tests/test_browser.py);
# screenshots in runs/test/browser/. The site test reads runs/site/ (make site first).
# REQUIRE_BROWSER=1 (CI) fails where the tests would skip (no Chromium, no root, no site).
test-browser: install
	LABKIT_SIZE=smoke LABKIT_RESULTS_DIR=runs/test/browser RAY_ADDRESS= LABKIT_LOGICAL_GPUS= \
	  LABKIT_REQUIRE_BROWSER=$(REQUIRE_BROWSER) $(PY) -m pytest tests/test_browser.py -m browser -v --durations=0

run: install
	$(VENV)/bin/labkit run $(NB) $(foreach kv,$(P),-p $(kv))

# A sweep of the lab reports (bench/sweeps/*.yaml) into runs/bench-<machine>-<time>/report.md.
SWEEP ?= bench/sweeps/core.yaml
bench: install
	$(VENV)/bin/labkit bench $(SWEEP)

lint: install
	$(VENV)/bin/ruff check labkit tests notebooks bench

strip: install
	$(VENV)/bin/nbstripout --keep-id --extra-keys "metadata.widgets cell.metadata.execution" notebooks/*.ipynb bench/*.ipynb

doctor: install
	$(VENV)/bin/labkit doctor

clean: install
	$(VENV)/bin/labkit clean
