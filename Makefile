# Set-up happens here so a fresh machine needs only `make test` / `make demo`. uv installs the
# dev extra in under a minute where pip takes three or more (it builds pyspark's 456 MB wheel
# from its sdist); pip does it when uv cannot (no network to PyPI but pip's own index, say).
# Both compile the bytecode at install: where PYTHONDONTWRITEBYTECODE is set (this machine, CI)
# nothing else would, and every test's child process and Spark Python worker compiled pyarrow,
# pyspark and the rest from source again (1.2 s -> 2.7 s an import; the suite ran 3 min longer).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: test test-fast test-spark lint lint-imports demo venv clean bench bytecode

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip uv
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e '.[dev]' \
	    || $(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# Two pytest-xdist workers (what CI's 2 cores hold): many tests wait on child processes, locks
# and the S3 server; the Spark tests stay together on one worker (one JVM, see conftest.py), the
# longest chain of the run (three workers measured no faster: 15:28 vs 15:26).
XDIST ?= -n 2 --dist loadgroup

# Our own packages' bytecode, for the same reason (0.35 s of every child process's imports);
# compileall rewrites only what changed.
bytecode: $(STAMP)
	$(PY) -m compileall -q hudi_format spark_adapter conformance tests benchmarks > /dev/null

test: lint bytecode
	$(PY) -m pytest -q -p no:cacheprovider $(XDIST) $(PYTEST_ARGS)

# ruff (pyflakes + pycodestyle errors), mypy (strict on the public modules), then the layers of
# ../shared/DESIGN.md and "no import cycle" (settings and contracts in pyproject.toml).
lint: lint-imports
	$(VENV)/bin/ruff check --quiet .
	$(VENV)/bin/mypy --no-error-summary

lint-imports: $(STAMP)
	$(VENV)/bin/lint-imports

# Only the PySpark (spark_adapter) tests: one local[2] SparkSession on Java 17 (JAVA_HOME, else
# `java` on the PATH), a few minutes. `make test` runs them too: pyspark is in the dev extra.
test-spark: bytecode
	$(PY) -m pytest -q -p no:cacheprovider -m spark $(PYTEST_ARGS)

# The quick loop while developing: no Spark, S3 server, randomised, crash or soak tests.
test-fast: bytecode
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow and not spark and not s3" $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) -m hudi_format.demo conformance/fixtures/tables/sample_table__mor__avro__v9_txns_simple_meta.zip

bench: $(STAMP)
	$(PY) -m pip install --quiet '.[bench]'
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
