# Set-up happens here so a fresh machine needs only `make test` / `make demo`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: test lint lint-imports demo venv clean bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

test: lint
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

# ruff (pyflakes + pycodestyle errors), then the layers of ../shared/DESIGN.md and "no import
# cycle" (contracts in pyproject.toml).
lint: lint-imports
	$(VENV)/bin/ruff check --quiet .

lint-imports: $(STAMP)
	$(VENV)/bin/lint-imports

# PySpark (spark_adapter) tests: a local[2] Spark on Java 17, a few minutes; not part of `test`.
test-spark: $(STAMP)
	$(PY) -c 'import pyspark, pandas' 2>/dev/null || $(PY) -m pip install --quiet -e '.[dev,spark]'
	HUDI_FORMAT_SPARK_TESTS=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_spark_adapter.py $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) -m hudi_format.demo conformance/fixtures/tables/sample_table__mor__avro__v9_txns_simple_meta.zip

bench: $(STAMP)
	$(PY) -m pip install --quiet '.[bench]'
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
