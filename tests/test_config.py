"""hoodie.properties: the units/table_props_* files and every fixture table's file."""

from __future__ import annotations

import shutil

import pytest

import hudi_format as hudi
from conftest import FIXTURE_TABLES, UNITS, expected
from hudi_format.config import (TableConfig, format_properties, parse_properties,
                                table_checksum)
from hudi_format.storage import Storage


def _load(name: str) -> TableConfig:
    return TableConfig.load(Storage(str(UNITS / name)))


def test_valid_properties():
    cfg = _load("table_props_valid")
    assert cfg.table_type == "COPY_ON_WRITE"  # written lower-case in the file
    assert cfg.version == 6 and cfg.name == "trips" and cfg.database == "db"
    assert cfg.record_key_fields == ["uuid"] and cfg.partition_fields == ["city"]
    assert cfg.ordering_fields == ["ts"] and cfg.keygen_type == "SIMPLE"
    assert cfg.base_file_format == "PARQUET" and cfg.populate_meta_fields
    assert not cfg.hive_style_partitioning and not cfg.url_encode_partitions
    assert cfg.metadata_partitions == ["files"] and cfg.timeline_timezone == "LOCAL"
    assert cfg["hoodie.table.cdc.enabled"] == "false"
    assert cfg.timeline_dir == ".hoodie" and cfg.archive_dir == ".hoodie/archived"


def test_minimal_and_partial_properties_take_hudi_defaults():
    cfg = _load("table_props_valid_minimum")
    assert cfg.partition_fields == [] and cfg.ordering_fields == []
    assert cfg.base_file_format == "PARQUET" and cfg.keygen_type == "NON_PARTITION"
    assert cfg.merge_mode == "COMMIT_TIME_ORDERING"
    partial = _load("table_props_partial")
    assert partial.table_type == "COPY_ON_WRITE" and partial.partition_fields == ["city"]
    assert _load("table_props_no_create_schema").create_schema is None


def test_invalid_properties_name_every_bad_key():
    with pytest.raises(hudi.TableConfigError) as info:
        _load("table_props_invalid")
    msg = str(info.value)
    assert "table_props_invalid/.hoodie/hoodie.properties" in msg
    for key in ("hoodie.table.name", "hoodie.table.version", "hoodie.table.base.file.format",
                "hoodie.table.checksum", "hoodie.timeline.layout.version",
                "hoodie.datasource.write.drop.partition.columns",
                "hoodie.datasource.write.hive_style_partitioning",
                "hoodie.datasource.write.partitionpath.urlencode"):
        assert key in msg


def test_checksum_mismatch_is_detected(tmp_path):
    shutil.copytree(UNITS / "table_props_valid", tmp_path / "t")
    props = tmp_path / "t" / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.table.name=trips", "hoodie.table.name=trip"))
    with pytest.raises(hudi.TableConfigError, match="checksum"):
        hudi.open_table(tmp_path / "t")


def test_unknown_table_type_and_missing_file(tmp_path):
    (tmp_path / "t" / ".hoodie").mkdir(parents=True)
    props = tmp_path / "t" / ".hoodie" / "hoodie.properties"
    props.write_text("hoodie.table.name=x\nhoodie.table.type=SOMETHING\nhoodie.table.version=6\n")
    with pytest.raises(hudi.TableConfigError, match="hoodie.table.type"):
        hudi.open_table(tmp_path / "t")
    props.unlink()
    with pytest.raises(hudi.TableNotFoundError):
        hudi.open_table(tmp_path / "t")


def test_backup_properties_are_used_when_the_file_is_missing(tmp_path):
    shutil.copytree(UNITS / "table_props_valid", tmp_path / "t")
    hoodie = tmp_path / "t" / ".hoodie"
    (hoodie / "hoodie.properties").rename(hoodie / "hoodie.properties.backup")
    assert TableConfig.load(Storage(str(tmp_path / "t"))).name == "trips"


@pytest.mark.parametrize("name", FIXTURE_TABLES)
def test_every_fixture_checksum_and_identity(fixture_tables, name):
    table = hudi.open_table(fixture_tables(name))
    cfg = table.config
    assert int(cfg["hoodie.table.checksum"]) == table_checksum(cfg.name, cfg.database or "")
    assert cfg.table_type == expected(name)["table_type"]


def test_java_properties_syntax_round_trips():
    text = ("# comment\n! also a comment\nkey\\ with\\ space = value\\:with\\=escapes\n"
            "uni=caf\\u00e9\ncont=first \\\n   second\nempty=\ncolon:value\n")
    props = parse_properties(text)
    assert props == {"key with space": "value:with=escapes", "uni": "café",
                     "cont": "first second", "empty": "", "colon": "value"}
    assert parse_properties(format_properties(props, "saved")) == props
    assert table_checksum("trips") == 3761586722  # the value Hudi wrote in table_props_valid


def test_properties_escapes_read_as_javas_rule_says():
    """Random values of backslashes, ``u``, hex digits and separators read as Java's
    ``Properties.load`` rule goes, one character at a time: ``\\t \\n \\r \\f``, ``\\uxxxx`` (four
    hex digits, else an error), any other escaped character itself, a last lone backslash kept."""
    import random
    from hudi_format.config import _unescape
    from hudi_format.errors import TableConfigError
    named = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}

    def by_character(s: str) -> str:
        out, i = [], 0
        while i < len(s):
            if s[i] == "\\" and i + 1 < len(s):
                if s[i + 1] == "u":
                    digits = s[i + 2:i + 6]
                    if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                        return "malformed"
                    out.append(chr(int(digits, 16)))
                    i += 6
                else:
                    out.append(named.get(s[i + 1], s[i + 1]))
                    i += 2
            else:
                out.append(s[i])
                i += 1
        return "".join(out)

    def read(s: str) -> str:
        try:
            return _unescape(s)
        except TableConfigError as exc:
            assert "malformed" in str(exc)
            return "malformed"
    rng = random.Random(3)
    alphabet = list("\\\\u0aF9gtnrf:= é")
    for _ in range(20_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert read(s) == by_character(s), repr(s)


def test_replace_properties_is_whole_or_nothing(tmp_path):
    """A rewrite of hoodie.properties never shows a part: the new file replaces the old one in one
    step (a hidden temp file renamed over it), and a file another writer's rewrite left broken is
    read from the backup it wrote first."""
    from hudi_format.config import PROPS_PATH, replace_properties
    shutil.copytree(UNITS / "table_props_valid", tmp_path / "t")
    storage = Storage(str(tmp_path / "t"))
    hoodie = tmp_path / "t" / ".hoodie"
    old = (hoodie / "hoodie.properties").read_text()
    replace_properties(storage, old.replace("hoodie.table.cdc.enabled=false", "hoodie.table.cdc.enabled=true"))
    assert TableConfig.load(storage)["hoodie.table.cdc.enabled"] == "true"
    assert sorted(p.name for p in hoodie.iterdir() if p.name.startswith((".hoodie.prop", "hoodie.prop"))) == \
        ["hoodie.properties"]   # no backup, no temp file left
    # killed half-way through a non-atomic rewrite: the backup is there, the file is cut short
    storage.write_bytes(PROPS_PATH + ".backup", storage.read_bytes(PROPS_PATH))
    (hoodie / "hoodie.properties").write_text("hoodie.table.name=trips\nhoodie.table.ty")
    assert TableConfig.load(storage)["hoodie.table.cdc.enabled"] == "true"


@pytest.mark.parametrize("escape", ["\\u12", "\\uzzzz", "\\u", "\\u00G1"])
def test_malformed_unicode_escape_is_a_table_config_error(tmp_path, escape):
    """Java's Properties.load refuses a malformed \\uxxxx escape; so do we, naming the file
    (found by the fuzzer: it was a bare ValueError from int())."""
    from hudi_format.config import TableConfig
    from hudi_format.errors import TableConfigError
    from hudi_format.storage import Storage
    hoodie = tmp_path / ".hoodie"
    hoodie.mkdir()
    (hoodie / "hoodie.properties").write_text(f"hoodie.table.name=t{escape}x\nhoodie.table.type=COPY_ON_WRITE\n")
    with pytest.raises(TableConfigError, match=r"hoodie\.properties.*malformed"):
        TableConfig.load(Storage(str(tmp_path)))
