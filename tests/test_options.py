"""The option registry: every key documented with a default of its type, one boolean parser,
aliases, scopes, unknown-key suggestions, and docs/options.md in step with the registry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format.errors import InvalidOptionError
from hudi_format.options import (READ_SCOPES, SCOPES, SERVICE_SCOPES, WRITE_SCOPES, OptionSpec, all_specs,
                                 default, option, parse_bool, spec, specs, validate)
from hudi_format.options.registry import declare

ROOT = Path(__file__).resolve().parents[1]


def test_every_option_has_a_doc_a_scope_and_a_default_of_its_type():
    everything = list(all_specs())
    assert len(everything) > 100
    for s in everything:
        assert s.key.startswith("hoodie."), s.key
        assert s.doc.strip() and s.doc.rstrip().endswith((".", ")")), s.key
        assert "\n" not in s.doc, s.key
        assert s.scope in SCOPES
        if s.default is None:
            continue
        # a default parses to itself: it has the option's type (and is allowed, and in range)
        assert s.parse(s.default) == s.default and type(s.parse(s.default)) is type(s.default), s.key
        expected = {"bool": bool, "int": int, "float": float, "str": str, "choice": str}[s.type]
        assert type(s.default) is expected, s.key


def test_one_boolean_parser():
    for text in ("true", "TRUE", "True", " true "):
        assert parse_bool("k", text) is True
    for text in ("false", "FALSE", "False"):
        assert parse_bool("k", text) is False
    assert parse_bool("k", True) is True and parse_bool("k", False) is False
    for bad in ("yes", "no", "0", "1", "", "on"):
        with pytest.raises(InvalidOptionError, match="k must be true or false"):
            parse_bool("k", bad)
    # every boolean option, whatever module reads it, parses the same way
    for key in ("hoodie.metadata.enable", "hoodie.clean.automatic", "hoodie.populate.meta.fields",
                "hoodie.compact.inline", "hoodie.bloom.index.use.metadata"):
        assert option({key: "FALSE"}, key) is False and option({key: "True"}, key) is True
        with pytest.raises(InvalidOptionError, match=key):
            option({key: "no"}, key)


def test_option_returns_the_parsed_value_or_the_registry_default():
    assert option({}, "hoodie.cleaner.commits.retained") == 10
    assert option(None, "hoodie.keep.max.commits") == 30
    assert option({"hoodie.keep.max.commits": None}, "hoodie.keep.max.commits") == 30
    assert option({"hoodie.keep.max.commits": "40"}, "hoodie.keep.max.commits") == 40
    assert option({"hoodie.index.type": "bloom"}, "hoodie.index.type") == "BLOOM"
    assert option({}, "hoodie.metadata.record.index.growth.factor") == 2.0
    assert default("hoodie.parquet.max.file.size") == 120 * 1024 * 1024
    with pytest.raises(KeyError):
        option({}, "hoodie.no.such.key")


def test_aliases_map_to_their_canonical_key():
    assert validate({"hoodie.datasource.clustering.inline.enable": "true"}) == {"hoodie.clustering.inline": True}
    assert option({"hoodie.datasource.clustering.async.enable": "true"}, "hoodie.clustering.async.enabled") is True
    assert spec("hoodie.datasource.clustering.inline.enable").key == "hoodie.clustering.inline"
    # the same option twice with different values is ambiguous
    with pytest.raises(InvalidOptionError, match="same option"):
        validate({"hoodie.clustering.inline": "true", "hoodie.datasource.clustering.inline.enable": "false"})
    assert validate({"hoodie.clustering.inline": "true", "hoodie.datasource.clustering.inline.enable": True}) == \
        {"hoodie.clustering.inline": True}


def test_unknown_keys_name_the_closest_known_one():
    with pytest.raises(InvalidOptionError, match="unknown write option 'hoodie.parquet.max.filesize'; "
                                                 "did you mean 'hoodie.parquet.max.file.size'"):
        validate({"hoodie.parquet.max.filesize": 1}, WRITE_SCOPES)
    with pytest.raises(InvalidOptionError, match="unknown table service option .*did you mean "
                                                 "'hoodie.cleaner.commits.retained'"):
        validate({"hoodie.cleaner.comits.retained": 1}, SERVICE_SCOPES, what="table service")
    with pytest.raises(InvalidOptionError, match="did you mean 'hoodie.metadata.enable'"):
        validate({"hoodie.metadata.enabled": "false"}, READ_SCOPES, what="read")
    with pytest.raises(InvalidOptionError, match="option keys"):
        validate({5: 1})
    with pytest.raises(InvalidOptionError, match="mapping"):
        validate([("hoodie.index.type", "BLOOM")])  # type: ignore[arg-type]


def test_scopes():
    # a reader takes read options only, and says where a write option belongs
    assert validate({"hoodie.metadata.enable": "false"}, READ_SCOPES) == {"hoodie.metadata.enable": False}
    with pytest.raises(InvalidOptionError, match="'hoodie.parquet.max.file.size' is a write option"):
        validate({"hoodie.parquet.max.file.size": 1}, READ_SCOPES, what="read")
    # a write takes write, service, metadata table and lock options (it runs all of them)
    opts = {"hoodie.parquet.max.file.size": "10", "hoodie.compact.inline": "true",
            "hoodie.metadata.record.index.enable": "true", "hoodie.write.lock.num_retries": "3"}
    assert validate(opts, WRITE_SCOPES) == {"hoodie.parquet.max.file.size": 10, "hoodie.compact.inline": True,
                                            "hoodie.metadata.record.index.enable": True,
                                            "hoodie.write.lock.num_retries": 3}
    assert set(specs("lock")) >= {"hoodie.write.lock.provider", "hoodie.client.heartbeat.interval_in_ms"}
    assert "hoodie.keep.min.commits" in specs("service") and "hoodie.keep.min.commits" not in specs("write")
    # families and Spark-only keys pass through unchanged
    assert validate({"hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
                     "hoodie.upsert.shuffle.parallelism": 200}) == \
        {"hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS", "hoodie.upsert.shuffle.parallelism": 200}


def test_wrong_values_name_the_key_and_what_it_accepts():
    with pytest.raises(InvalidOptionError, match=r"hoodie.logfile.data.block.format must be one of \['avro', "
                                                 r"'parquet'\], got 'orc'"):
        validate({"hoodie.logfile.data.block.format": "orc"})
    with pytest.raises(InvalidOptionError, match="hoodie.parquet.small.file.limit must be an integer"):
        validate({"hoodie.parquet.small.file.limit": "small"})
    with pytest.raises(InvalidOptionError, match="hoodie.metadata.compact.max.delta.commits must be positive"):
        validate({"hoodie.metadata.compact.max.delta.commits": 0})
    with pytest.raises(InvalidOptionError, match="hoodie.metadata.record.index.growth.factor must be a number"):
        validate({"hoodie.metadata.record.index.growth.factor": "double"})


def test_a_key_is_declared_once():
    with pytest.raises(ValueError, match="declared twice"):
        declare(OptionSpec("hoodie.cleaner.commits.retained", "int", 10, "Again.", "service"))
    with pytest.raises(ValueError, match="scope"):
        OptionSpec("hoodie.x", "int", 1, "Doc.", "everywhere")
    with pytest.raises(ValueError, match="allowed"):
        declare(OptionSpec("hoodie.test.choice", "choice", "c", "Doc.", "write", allowed=("a", "b")))


def test_services_read_the_one_registry():
    """No second registry: services name the keys they read; values and defaults come from
    hudi_format.options (the tuple views of the old registries are gone)."""
    from hudi_format.options import values
    from hudi_format.services import SERVICE_OPTIONS, archival, cleaning
    import hudi_format.metadata.options as mdt_options
    assert not hasattr(mdt_options, "MDT_OPTIONS")
    assert not hasattr(cleaning, "SERVICE_OPTIONS") and not hasattr(archival, "SERVICE_OPTIONS")
    assert values({}, archival.OPTION_KEYS)["hoodie.cleaner.commits.retained"] == \
        values({}, cleaning.OPTION_KEYS)["hoodie.cleaner.commits.retained"] == 10
    assert values({"hoodie.cleaner.commits.retained": "7"}, cleaning.OPTION_KEYS)["hoodie.cleaner.commits.retained"] == 7
    assert SERVICE_OPTIONS["hoodie.layout.optimize.strategy"] is spec("hoodie.layout.optimize.strategy")


def test_writes_services_and_reads_validate_through_the_registry(tmp_path):
    path = str(tmp_path / "t")
    data = pa.table({"id": ["a", "b"], "ts": [1, 1]})
    with pytest.raises(InvalidOptionError, match="did you mean 'hoodie.datasource.clustering.inline.enable'|"
                                                 "did you mean 'hoodie.clustering.inline'"):
        hudi.write(path, data, record_key="id", ordering_field="ts", options={"hoodie.clustering.inlined": "true"})
    assert not (tmp_path / "t").exists() or not (tmp_path / "t" / ".hoodie" / "hoodie.properties").exists()
    hudi.write(path, data, record_key="id", ordering_field="ts",
               options={"hoodie.datasource.clustering.inline.enable": "TRUE", "hoodie.metadata.enable": "False"})
    table = hudi.open_table(path, options={"hoodie.metadata.enable": "FALSE"})
    assert table.metadata_table is None and table.read().num_rows == 2
    with pytest.raises(InvalidOptionError, match="a read does not take it"):
        hudi.open_table(path, options={"hoodie.index.type": "BLOOM"})
    with pytest.raises(InvalidOptionError, match="unknown table service option"):
        table.compact({"hoodie.compact.inline.max.delta.comits": 1})


def test_docs_options_md_is_generated_from_the_registry():
    committed = (ROOT / "docs" / "options.md").read_text()
    generated = subprocess.run([sys.executable, "-m", "hudi_format.options.docs"], capture_output=True,
                               text=True, check=True, cwd=ROOT).stdout
    assert generated == committed, "docs/options.md is stale: run python -m hudi_format.options.docs > docs/options.md"
    for s in all_specs():
        assert f"`{s.key}`" in committed


def test_the_registry_sits_in_the_bottom_layer():
    """``hudi_format.options`` is part of the config layer: it may import errors, nothing above."""
    import ast
    for path in (ROOT / "hudi_format" / "options").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                assert node.module == "errors", f"{path.name} imports hudi_format.{node.module}"
            if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                assert not any(str(n).startswith("hudi_format") for n in names), path.name


@pytest.mark.parametrize("opts, match", [
    ({"hoodie.index.bloom.fpp": "0"}, r"hoodie\.index\.bloom\.fpp must be in \(0, 1\)"),
    ({"hoodie.index.bloom.fpp": "1.5"}, r"hoodie\.index\.bloom\.fpp must be in \(0, 1\)"),
    ({"hoodie.parquet.max.file.size": "0"}, r"hoodie\.parquet\.max\.file\.size must be positive"),
    ({"hoodie.copyonwrite.record.size.estimate": "0"}, r"record\.size\.estimate must be positive"),
    ({"hoodie.logfile.max.size": "-1"}, r"hoodie\.logfile\.max\.size must be positive"),
    ({"hoodie.cleaner.commits.retained": "0"}, r"hoodie\.cleaner\.commits\.retained must be positive"),
    ({"hoodie.parquet.small.file.limit": "-5"}, r"small\.file\.limit must not be negative"),
    ({"hoodie.keep.min.commits": "40"}, r"hoodie\.keep\.max\.commits \(30\) must be greater than hoodie\.keep\.min\.commits \(40\)"),
    ({"hoodie.keep.min.commits": "5", "hoodie.keep.max.commits": "5"}, r"must be greater than"),
])
def test_out_of_range_options_are_refused_before_anything_is_written(tmp_path, opts, match):
    """Values that used to fail mid-write (a bloom filter sized for fpp 0), pass silently (a
    max file size of 0: a file per record) or break every inline service after the commit
    (keep.min above keep.max, no commit retained) are refused up front: no table is created."""
    path = tmp_path / "t"
    with pytest.raises(InvalidOptionError, match=match):
        hudi.write(str(path), pa.table({"id": ["a", "b"], "ts": [1, 2], "p": ["x", "y"]}), operation="insert",
                   record_key="id", ordering_field="ts", partition_by="p", options=opts)
    assert not path.exists() or not any(path.iterdir())
    assert validate({"hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4"})   # in order: fine
