"""Creating tables: hoodie.properties, folders and partition metadata, against Hudi's own files.

Truth is the fixture tables written by Apache Hudi 0.14/0.15 (v6) and 1.0 (v8): a table created
here with a fixture's settings must carry the same properties, and where the fixture was written
by the same Hudi path on a JDK 9+ (``ConcurrentHashMap``-backed ``Properties``) the same file,
line for line, except for the two timestamp comment lines.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from conftest import FIXTURE_TABLES
from hudi_format.config import PROPS_PATH, TableConfig, parse_properties, table_checksum
from hudi_format.errors import InvalidOptionError, TableConfigError, TableNotFoundError
from hudi_format.storage import Storage
from hudi_format.table_init import (create_table, ensure_table, java_properties_order,
                                    properties_text, table_properties, write_partition_metadata)

V6_V8 = [n for n in FIXTURE_TABLES if re.search(r"__v[68]_", n)]
# Written by Hudi 0.15 (v6 MOR) / 1.0 (v8) on a JDK 9+: key order reproducible exactly.
# Not here: the 0.14 COW tables (JDK 8, whose Properties is a Hashtable with another order)
# and v8_empty (created through a path whose builder inserts keys in another order).
SAME_ORDER = [n for n in V6_V8 if n.startswith(("sample_table__mor__parquet__v6", "quickstart"))
              or (n.startswith("sample_table__cow__v8") and not n.endswith("v8_empty"))]

INSTANT_LINE = re.compile(r"^#Properties saved on \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6})?Z$")
DATE_LINE = re.compile(r"^#(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
                       r" \d\d \d\d:\d\d:\d\d \S+ \d{4}$")


def _fixture_props(path: Path) -> tuple[str, dict[str, str]]:
    text = (path / ".hoodie" / "hoodie.properties").read_text()
    return text, parse_properties(text)


def _settings(p: dict[str, str]) -> dict:
    """create_table arguments reproducing a fixture's table."""
    return dict(
        table_name=p["hoodie.table.name"], table_type=p["hoodie.table.type"],
        record_key_fields=p.get("hoodie.table.recordkey.fields"),
        partition_fields=p.get("hoodie.table.partition.fields"),
        ordering_fields=p.get("hoodie.table.precombine.field") or p.get("hoodie.table.ordering.fields"),
        keygen_type=p.get("hoodie.table.keygenerator.type"),
        keygen_class=p.get("hoodie.table.keygenerator.class"),
        hive_style=p["hoodie.datasource.write.hive_style_partitioning"] == "true",
        url_encode=p["hoodie.datasource.write.partitionpath.urlencode"] == "true",
        populate_meta_fields=p.get("hoodie.populate.meta.fields", "true") == "true",
        table_version=int(p["hoodie.table.version"]),
        create_schema=p.get("hoodie.table.create.schema"), database=p.get("hoodie.database.name"))


@pytest.mark.parametrize("name", V6_V8)
def test_properties_match_fixture(fixture_tables, tmp_path, name):
    _, theirs = _fixture_props(fixture_tables(name))
    cfg = create_table(Storage(tmp_path / "t"), **_settings(theirs))
    text = (tmp_path / "t" / PROPS_PATH).read_text()
    ours = parse_properties(text)
    assert ours == theirs  # same keys, same values (checksum included)
    assert dict(cfg) == theirs
    lines = text.split("\n")
    assert INSTANT_LINE.match(lines[0]) and DATE_LINE.match(lines[1]), lines[:2]
    assert text.endswith("\n") and "\r" not in text


@pytest.mark.parametrize("name", SAME_ORDER)
def test_properties_file_identical_to_fixture(fixture_tables, tmp_path, name):
    text, theirs = _fixture_props(fixture_tables(name))
    create_table(Storage(tmp_path / "t"), **_settings(theirs))
    ours = (tmp_path / "t" / PROPS_PATH).read_text()
    assert ours.split("\n")[2:] == text.split("\n")[2:]


def test_fixture_comment_lines_are_what_we_write(fixture_tables):
    for name in V6_V8:
        text, _ = _fixture_props(fixture_tables(name))
        first, second = text.split("\n")[:2]
        assert INSTANT_LINE.match(first), (name, first)
        assert DATE_LINE.match(second), (name, second)


def test_key_order_replays_java_concurrent_hashmap():
    # v8 empty COW, non-partitioned, no ordering field: the keys of Hudi 1.0's builder
    keys = ["hoodie.database.name", "hoodie.table.name", "hoodie.table.type", "hoodie.table.version",
            "hoodie.timeline.layout.version", "hoodie.table.initial.version",
            "hoodie.archivelog.folder", "hoodie.timeline.path", "hoodie.timeline.history.path",
            "hoodie.table.recordkey.fields", "hoodie.table.keygenerator.type"]
    order = java_properties_order(keys)
    assert sorted(order) == sorted(keys + ["hoodie.table.checksum"])
    # 12 entries: the map resized from 16 to 32 bins, iterated in bin order
    from hudi_format.java_compat import hashmap_spread as _spread, java_string_hash
    bins = [_spread(java_string_hash(k)) & 31 for k in order]
    assert bins == sorted(bins)
    # 11 entries: still 16 bins
    order = java_properties_order(keys[:-1])
    bins = [_spread(java_string_hash(k)) & 15 for k in order]
    assert bins == sorted(bins) and len(order) == 11


@pytest.mark.parametrize("name", ["sample_table__cow__v6_empty", "sample_table__mor__parquet__v6_empty",
                                  "sample_table__cow__v8_empty"])
def test_folders_match_fixture_empty_table(fixture_tables, tmp_path, name):
    base = fixture_tables(name)
    _, theirs = _fixture_props(base)
    create_table(Storage(tmp_path / "t"), **_settings(theirs))

    def tree(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*") if "__MACOSX" not in str(p)}

    ours = tree(tmp_path / "t") - {".hoodie/.locks"}
    assert ours == tree(base)


@pytest.mark.parametrize("name", ["sample_table__cow__v6_empty", "sample_table__mor__parquet__v6_empty",
                                  "sample_table__cow__v8_empty", "sample_table__cow__v8_complexkeygen_hivestyle",
                                  "quickstart_trips_table__mor__avro__v6_trips_8i1u"])
def test_created_table_opens_in_hudi_rs(fixture_tables, tmp_path, name):
    hudi = pytest.importorskip("hudi")
    base = fixture_tables(name)
    _, theirs = _fixture_props(base)
    create_table(Storage(tmp_path / "t"), **_settings(theirs))
    ours = hudi.HudiTableBuilder.from_base_uri(str(tmp_path / "t")).build()
    ref = hudi.HudiTableBuilder.from_base_uri(str(base)).build()
    assert ours.table_type == theirs["hoodie.table.type"]
    assert ours.table_name == theirs["hoodie.table.name"]
    opts = ours.hudi_options()
    assert opts["hoodie.table.version"] == theirs["hoodie.table.version"]
    assert opts["hoodie.table.checksum"] == theirs["hoodie.table.checksum"]
    assert ours.get_timeline().get_completed_commits() == []
    if name.endswith("_empty"):  # no commits: the schema comes from hoodie.table.create.schema
        assert ours.get_schema() == ref.get_schema()


def test_table_config_load_round_trip(tmp_path):
    storage = Storage(tmp_path)
    cfg = create_table(storage, table_name="trips", table_type="mor", record_key_fields=["uuid"],
                       partition_fields="city", ordering_fields="ts", hive_style=True,
                       database="db")
    loaded = TableConfig.load(storage)
    assert dict(loaded) == dict(cfg)
    assert loaded.table_type == "MERGE_ON_READ" and loaded.version == 8
    assert loaded.record_key_fields == ["uuid"] and loaded.partition_fields == ["city"]
    assert loaded.ordering_fields == ["ts"] and loaded.keygen_type == "SIMPLE"
    assert loaded.merge_mode == "EVENT_TIME_ORDERING" and loaded.hive_style_partitioning
    assert loaded["hoodie.record.merge.strategy.id"] == "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
    assert loaded["hoodie.table.checksum"] == str(table_checksum("trips", "db"))
    assert loaded.timeline_dir == ".hoodie/timeline"


def test_commit_time_ordering_without_ordering_fields(tmp_path):
    cfg = create_table(Storage(tmp_path), table_name="t", record_key_fields="id")
    assert cfg["hoodie.record.merge.mode"] == "COMMIT_TIME_ORDERING"
    assert cfg["hoodie.compaction.payload.class"].endswith("OverwriteWithLatestAvroPayload")
    assert cfg["hoodie.record.merge.strategy.id"] == "ce9acb64-bde0-424c-9b91-f6ebba25356d"
    assert cfg["hoodie.table.keygenerator.type"] == "NON_PARTITION"
    assert "hoodie.table.precombine.field" not in cfg and "hoodie.table.partition.fields" not in cfg


def test_v6_keys(tmp_path):
    cow = table_properties(table_name="t", record_key_fields="a,b", partition_fields="p",
                           ordering_fields="ts", table_version=6)
    assert cow["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.ComplexKeyGenerator"
    assert "hoodie.table.keygenerator.type" not in cow
    assert "hoodie.compaction.payload.class" not in cow  # 0.x writes it for MOR tables only
    assert "hoodie.record.merge.mode" not in cow and "hoodie.table.initial.version" not in cow
    assert "hoodie.timeline.path" not in cow and cow["hoodie.timeline.layout.version"] == "1"
    mor = table_properties(table_name="t", table_type="MERGE_ON_READ", record_key_fields="a",
                           table_version=6)
    assert mor["hoodie.compaction.payload.class"].endswith("OverwriteWithLatestAvroPayload")
    assert mor["hoodie.compaction.record.merger.strategy"] == "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"


def test_user_provided_key_generator_and_extra(tmp_path):
    props = table_properties(table_name="t", record_key_fields="id", partition_fields="p",
                             keygen_class="com.acme.MyKeyGen", base_file_format="orc",
                             populate_meta_fields=False,
                             extra={"hoodie.table.timeline.timezone": "UTC", "hoodie.table.cdc.enabled": True})
    assert props["hoodie.table.keygenerator.type"] == "USER_PROVIDED"
    assert props["hoodie.table.keygenerator.class"] == "com.acme.MyKeyGen"
    assert props["hoodie.table.base.file.format"] == "ORC"
    assert props["hoodie.populate.meta.fields"] == "false"
    assert props["hoodie.table.timeline.timezone"] == "UTC"
    assert props["hoodie.table.cdc.enabled"] == "true"


def test_escaping_round_trips(tmp_path):
    schema = '{"type":"record","name":"r","fields":[{"name":"a=b #!","type":"string","doc":"caf\u00e9 \\\\ x"}]}'
    cfg = create_table(Storage(tmp_path), table_name="t", record_key_fields="id", create_schema=schema)
    raw = (tmp_path / PROPS_PATH).read_bytes()
    assert raw.isascii()  # Properties.store writes \\uXXXX escapes
    assert b"\\u00E9" in raw and b"a\\=b \\#\\!" in raw
    assert TableConfig.load(Storage(tmp_path)).create_schema == schema == cfg.create_schema


def test_refuses_to_overwrite(tmp_path):
    storage = Storage(tmp_path)
    create_table(storage, table_name="first", record_key_fields="id")
    before = (tmp_path / PROPS_PATH).read_bytes()
    with pytest.raises(TableConfigError, match="already exists"):
        create_table(storage, table_name="second", record_key_fields="id")
    assert (tmp_path / PROPS_PATH).read_bytes() == before


def test_refuses_when_only_backup_exists(tmp_path):
    storage = Storage(tmp_path)
    create_table(storage, table_name="first", record_key_fields="id")
    (tmp_path / PROPS_PATH).rename(tmp_path / (PROPS_PATH + ".backup"))
    with pytest.raises(TableConfigError):
        create_table(storage, table_name="second", record_key_fields="id")


def test_concurrent_creators_one_wins(tmp_path):
    results, errors = [], []
    barrier = threading.Barrier(8)

    def run(i):
        barrier.wait()
        try:
            results.append(create_table(Storage(tmp_path), table_name=f"t{i}", record_key_fields="id"))
        except TableConfigError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 1 and len(errors) == 7
    assert TableConfig.load(Storage(tmp_path)).name == results[0].name
    assert not [p for p in (tmp_path / ".hoodie").iterdir() if p.name.endswith(".tmp")]


def test_create_on_memory_filesystem():
    storage = Storage("memory://table-init-test/t1")
    cfg = create_table(storage, table_name="m", table_type="MERGE_ON_READ", record_key_fields="k",
                       table_version=6)
    assert TableConfig.load(storage).name == "m" and cfg.version == 6
    with pytest.raises(TableConfigError):
        create_table(storage, table_name="m", record_key_fields="k")
    storage.fs.rm("/table-init-test", recursive=True)


@pytest.mark.parametrize("kwargs, match", [
    (dict(table_version=9), "version"),
    (dict(table_version=7), "version"),
    (dict(table_type="BOTH"), "table_type"),
    (dict(table_name=""), "table_name"),
    (dict(table_name="a\nb"), "table_name"),
    (dict(base_file_format="csv"), "base_file_format"),
    (dict(keygen_type="NOPE"), "keygenerator.type"),
    (dict(keygen_type="SIMPLE", keygen_class="org.apache.hudi.keygen.ComplexKeyGenerator"), "COMPLEX"),
    (dict(extra={"hoodie.record.merge.mode": "LATEST"}), "merge.mode"),
])
def test_invalid_settings(tmp_path, kwargs, match):
    args = dict(table_name="t", record_key_fields="id")
    args.update(kwargs)
    with pytest.raises(InvalidOptionError, match=match):
        create_table(Storage(tmp_path), **args)
    assert not (tmp_path / PROPS_PATH).exists()


def test_ensure_table(tmp_path):
    storage = Storage(tmp_path)
    props = table_properties(table_name="t", record_key_fields="id", table_version=6)
    with pytest.raises(TableNotFoundError):
        ensure_table(storage, TableConfig(props), create=False)
    created = ensure_table(storage, TableConfig(props))
    assert dict(created) == {**props, "hoodie.table.checksum": str(table_checksum("t"))}
    # an existing table is loaded, never replaced
    other = table_properties(table_name="other", record_key_fields="id")
    assert ensure_table(storage, TableConfig(other)).name == "t"


def test_properties_text_recomputes_checksum():
    props = table_properties(table_name="t", record_key_fields="id", database="db")
    props["hoodie.table.checksum"] = "1"
    text = properties_text(props, 8)
    assert parse_properties(text)["hoodie.table.checksum"] == str(table_checksum("t", "db"))


# -- .hoodie_partition_metadata --------------------------------------------------------------------

def _partition_files(base: Path) -> list[Path]:
    return [p for p in base.rglob(".hoodie_partition_metadata")
            if "__MACOSX" not in str(p) and "/.hoodie/" not in str(p)]


@pytest.mark.parametrize("name", ["sample_table__cow__v6_simplekeygen_nonhivestyle",
                                  "sample_table__cow__v8_complexkeygen_hivestyle",
                                  "sample_table__cow__v8_nonpartitioned",
                                  "sample_table__cow__v9_timebasedkeygen_epochmillis"])
def test_partition_metadata_matches_fixture(fixture_tables, tmp_path, name):
    base = fixture_tables(name)
    files = _partition_files(base)
    assert files
    for f in files:
        rel = f.parent.relative_to(base).as_posix()
        rel = "" if rel == "." else rel
        theirs = f.read_text().split("\n")
        commit_time = parse_properties(f.read_text())["commitTime"]
        storage = Storage(tmp_path / name)
        assert write_partition_metadata(storage, rel, commit_time) is True   # depth inferred
        ours = (tmp_path / name / rel / ".hoodie_partition_metadata").read_text().split("\n")
        assert ours[0] == theirs[0] == "#partition metadata"
        assert DATE_LINE.match(ours[1]) and DATE_LINE.match(theirs[1])
        assert ours[2:] == theirs[2:]


def test_partition_metadata_is_never_rewritten(tmp_path):
    storage = Storage(tmp_path)
    assert write_partition_metadata(storage, "a/b", "20240101000000000") is True
    before = (tmp_path / "a/b/.hoodie_partition_metadata").read_bytes()
    assert write_partition_metadata(storage, "a/b", "20250101000000000") is False
    assert (tmp_path / "a/b/.hoodie_partition_metadata").read_bytes() == before
    assert b"partitionDepth=2\n" in before
    assert [p.name for p in (tmp_path / "a/b").iterdir()] == [".hoodie_partition_metadata"]
