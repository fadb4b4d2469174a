# Set-up happens here so a fresh machine needs only `make test` / `make demo`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: test demo venv clean bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) -m hudi_format.demo conformance/fixtures/tables/sample_table__mor__avro__v9_txns_simple_meta.zip

bench: $(STAMP)
	$(PY) -m pip install --quiet '.[bench]'
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
