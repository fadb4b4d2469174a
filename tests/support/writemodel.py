"""A model of what a Hudi table should contain after a sequence of writes, and checks that our
reader and hudi-rs both return exactly that after every commit, as of every commit, and
incrementally between commits."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
from hudi import HudiReadOptions, HudiTableBuilder

import hudi_format as hudi
from canonical import canonical_rows
from conformance.model import Model as RowModel

SCHEMA = pa.schema([
    ("id", pa.string()), ("ts", pa.int64()), ("p", pa.string()), ("region", pa.string()), ("amount", pa.decimal128(12, 2)),
    ("score", pa.float64()), ("n", pa.int32()), ("when", pa.timestamp("us", tz="UTC")),
    ("day", pa.date32()), ("flag", pa.bool_()), ("tags", pa.list_(pa.string())),
    ("info", pa.struct([("a", pa.int64()), ("b", pa.string())])),
])
DATA_COLS = SCHEMA.names


def make_rows(ids, ts, partitions=("a", "b", "c"), seed=0) -> pa.Table:
    rows = []
    for i in ids:
        k = int(i)
        rows.append({
            "id": f"k{k:05d}", "ts": ts, "p": partitions[k % len(partitions)], "region": f"r{k % 2}",
            "amount": decimal.Decimal(k * 7 + seed) / 100, "score": k * 0.5 + seed,
            "n": k + seed, "when": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=k + seed),
            "day": dt.date(2024, 1, 1) + dt.timedelta(days=(k + seed) % 300), "flag": (k + seed) % 2 == 0,
            "tags": [f"t{k % 3}", f"s{seed}"], "info": {"a": k * seed, "b": f"v{seed}"}})
    return pa.Table.from_pylist(rows, schema=SCHEMA)


class Model(RowModel):
    """The conformance suite's row model (one model for both), keyed like these tests' tables:
    record key ``id``, partition ``p``, ordering field ``ts``; event-time ordering also applies
    to inserts and bulk inserts of keys the table already has. A key lives in one partition
    here (``make_rows`` derives ``p`` from it), so rows are keyed by ``id`` alone."""

    def __init__(self, event_time: bool):
        super().__init__(key="id", partition="p", event_time=event_time, ordering="ts", global_index=True,
                         ordered_ops=("insert", "upsert", "bulk_insert"))


def data_rows(table: pa.Table) -> list[dict]:
    if table.num_rows == 0:
        return []   # a table whose commits were all rolled back may not know its columns
    return canonical_rows(table.select(DATA_COLS))


def model_rows(rows: dict) -> list[dict]:
    return canonical_rows(pa.Table.from_pylist(list(rows.values()), schema=SCHEMA))


def hudi_rs_read(path: str, **opts) -> pa.Table:
    table = HudiTableBuilder.from_base_uri(path).build()
    options = HudiReadOptions()
    if "as_of" in opts:
        options = options.with_as_of_timestamp(opts["as_of"])
    batches = table.read(options)
    schema = table.get_schema_with_meta_fields() if batches == [] else None
    return pa.Table.from_batches(batches, schema=schema)


def latest_rows(*batches: pa.Table, key: str = "id") -> list[dict]:
    """The canonical rows of ``batches`` written one after the other: the last row of each key."""
    rows: dict = {}
    for b in batches:
        rows.update({r[key]: r for r in b.to_pylist()})
    return canonical_rows(pa.Table.from_pylist(list(rows.values())))


def assert_both_read(path: str, want: list[dict], columns: list[str]) -> None:
    """Our reader and hudi-rs both return ``want`` (canonical rows of ``columns``)."""
    assert canonical_rows(hudi.open_table(path).read(columns=columns)) == want
    assert canonical_rows(hudi_rs_read(path).select(columns)) == want


def check_all(path: str, model: Model, instants: list) -> None:
    """Every commit: our snapshot == hudi-rs snapshot == model, incl. meta fields."""
    table = hudi.open_table(path)
    ours = table.read()
    assert data_rows(ours) == model_rows(model.rows)
    theirs = hudi_rs_read(path)
    assert canonical_rows(ours.select(theirs.column_names)) == canonical_rows(theirs)
    # the meta fields say which commit wrote each row
    by_key = {r["id"]: r["_hoodie_commit_time"] for r in ours.to_pylist()}
    assert by_key == {k: instants[c].timestamp for k, c in model.writer.items()}
    v8 = table.version >= 8
    bound = [(i.completion_time if v8 else i.timestamp) for i in instants]
    for c, (rows, writer) in enumerate(model.history):
        got = table.read(as_of=bound[c])
        assert data_rows(got) == model_rows(rows), f"time travel to commit {c}"
        theirs = hudi_rs_read(path, as_of=bound[c])
        assert canonical_rows(theirs.select(DATA_COLS)) == model_rows(rows), f"hudi-rs time travel {c}"
        start = bound[c - 1] if c else "0"
        inc = table.read_incremental(start, bound[c])
        want = {k: r for k, r in rows.items() if writer.get(k) == c}
        assert data_rows(inc) == model_rows(want), f"incremental into commit {c}"


# -- the metadata table's files listing against storage (used by the torture and crash tests) --------
def committed_files(path: str) -> dict[str, dict[str, int]]:
    """Partition -> {file name: size} of the data files of completed instants, from storage."""
    import posixpath

    from hudi_format.config import TableConfig
    from hudi_format.read.snapshot import ReadState
    from hudi_format.storage import Storage
    from hudi_format.timeline import Timeline
    from hudi_format.view.file_names import parse_base_file_name, parse_log_file_name

    st = Storage(path)
    cfg = TableConfig.load(st)
    state = ReadState(cfg, Timeline.load(st, cfg))
    out: dict[str, dict[str, int]] = {}
    for f in st.walk_files("", skip_dirs=(".hoodie",)):
        part, name = posixpath.split(f.path)
        if name.startswith(".hoodie_partition_metadata"):
            continue
        parsed = parse_log_file_name(name) if name.startswith(".") else parse_base_file_name(name)
        if parsed is None or not state.visible(parsed.instant_time):
            continue
        out.setdefault(part, {})[name] = f.size
    return {p: files for p, files in out.items() if files}


def metadata_listing_problem(path: str) -> str | None:
    """Why the metadata table's ``files`` listing differs from storage (``None``: it equals the
    committed files, or the table has no usable metadata table and readers list storage)."""
    import posixpath

    from hudi_format.config import TableConfig
    from hudi_format.metadata.reader import MetadataTable
    from hudi_format.storage import Storage

    st = Storage(path)
    cfg = TableConfig.load(st)
    mt = MetadataTable(st, cfg)
    if "files" not in mt.enabled_partitions:
        return None
    if mt.staleness() is not None:
        return f"metadata table declared but unusable: {mt.staleness()}"
    listed = {p: {posixpath.basename(f.path): f.size for f in infos}
              for p, infos in mt.files_listing().items() if infos}
    stored = committed_files(path)
    if listed == stored:
        return None
    diff = []
    for p in sorted(set(listed) | set(stored)):
        a, b = listed.get(p, {}), stored.get(p, {})
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                diff.append(f"{p}/{name}: metadata {a.get(name)} storage {b.get(name)}")
    return "metadata table listing != storage: " + "; ".join(diff[:8]) + (" ..." if len(diff) > 8 else "")
