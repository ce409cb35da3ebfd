# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create or refresh the virtualenv in .venv first (idempotent).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# The stamp changes whenever pyproject.toml does, so edits reinstall.
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
PYSPARK_VERSION := 4.3.0

export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(PY))
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: install chromium test test-full test-bench test-fast demo bench airflow airflow-stop clean

# The class archive layout jobs' drivers start from (layout_core/base/jvm.py): made once,
# again when Java, Spark or its jars change.
install: $(STAMP)
	$(PY) -m layout_core.spark.class_archive

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	# pyspark-client (a dependency of the Airflow Spark provider) overwrites
	# pyspark's python files with its own release: put pyspark's back.
	$(PIP) install -q --force-reinstall --no-deps pyspark==$(PYSPARK_VERSION)
	$(PY) -c "import pyspark, sys; v = pyspark.__version__; sys.exit(0 if v == '$(PYSPARK_VERSION)' else 'pyspark is ' + v)"
	rm -f $(VENV)/.installed-*
	touch $@

# Headless Chromium (Debian's package) for the screenshot of the Layouts pages in
# tests/system/test_airflow_deployment.py; installed only where it is missing.
chromium:
	@command -v chromium >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

# Three pytest-xdist workers (on 2 cores the third fills the time the others wait for JVM
# starts, subprocesses and I/O: with two, both cores were 83% busy), each taking whole
# modules (module fixtures lay tables out once), longest first (tests/conftest.py);
# TEST_WORKERS=0 runs everything in one process.
# --durations: CI's log names the slowest tests.
# make test (CI) leaves out the tests marked `extended`: further cases of guarantees it checks
# once elsewhere (each says which); make test-full runs them too. Run it before changing a flow.
TEST_WORKERS ?= 3
WORKERS := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
test: install chromium
	$(PY) -m pytest -q --durations=25 -m "not extended" $(WORKERS)

test-full: install chromium
	$(PY) -m pytest -q --durations=25 $(WORKERS)

# The benchmarks at their larger sizes (tests/bench: B1 with Spark and diPs, TPC-DS on three
# templates, the shift benchmark with every q); `make test` deselects them and runs a smaller
# version of each.
test-bench: install
	$(PY) -m pytest -q --durations=0 -m bench tests/bench $(WORKERS)

test-fast: install
	$(PY) -m pytest -q -m "not slow" $(WORKERS)

demo: install
	$(PY) -m layout_core.cli demo

bench: install
	$(PY) -m layout_core.cli bench sun --json

# A real Airflow on 127.0.0.1 (api-server, scheduler, DAG processor, triggerer; metadata in
# the PostgreSQL database layout_airflow on 127.0.0.1:5432), left running in the background.
airflow: install
	$(PY) -m layout_core.airflow.deployment start

airflow-stop: install
	$(PY) -m layout_core.airflow.deployment stop

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
