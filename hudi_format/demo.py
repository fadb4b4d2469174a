"""``make demo``: open a table written by Apache Hudi and show what hudi_format sees in it.

Until the writer lands, ``make demo`` passes a zipped fixture table (a Merge-on-Read table
written by Apache Hudi 1.1 with updates, deletes, insert overwrite, compaction and clustering);
the demo unpacks it into a temporary folder and prints its timeline, file slices, a snapshot,
a time-travel and an incremental query. Any table path works too.
"""

from __future__ import annotations

import sys
import tempfile
import zipfile
from pathlib import Path

import hudi_format as hudi


def _unzip(archive: Path, dest: str) -> Path:
    with zipfile.ZipFile(archive) as zf:
        members = [m for m in zf.namelist() if not m.startswith("__MACOSX")]
        zf.extractall(dest, members)
    return Path(dest) / members[0].split("/")[0]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m hudi_format.demo <table path or zipped table>", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        root = _unzip(Path(argv[0]), tmp) if argv[0].endswith(".zip") else argv[0]
        table = hudi.open_table(root)
        print(f"table {table.name}: {table.table_type}, table version {table.version}")
        print(f"record key {table.config.record_key_fields}, partitioned by "
              f"{table.config.partition_fields}, merge mode {table.config.merge_mode}\n")

        print("timeline (requested -> completed, action, state):")
        for inst in table.timeline.instants:
            print(f"  {inst.timestamp} -> {inst.completion_time or '-':17}  "
                  f"{inst.action:13} {inst.state.name}")

        slices = table.file_slices()
        print(f"\nlatest file slices ({len(slices)}):")
        for s in slices:
            logs = f" + {len(s.log_files)} log file(s)" if s.log_files else ""
            print(f"  {s.partition_path or '.':12} {s.file_id[:13]}  base@{s.base_instant}"
                  f"  {s.total_size:>7} bytes{logs}")

        cols = ["txn_id", "region", "txn_type", "amount", "_hoodie_commit_time"]
        snap = table.read(columns=cols).sort_by("txn_id")
        print(f"\nsnapshot: {snap.num_rows} rows")
        _print_rows(snap)

        writes = table.timeline.write_instants()
        first = writes[0]
        as_of = first.completion_time or first.timestamp
        print(f"\ntime travel to the first commit ({as_of}): "
              f"{table.read(as_of=as_of).num_rows} rows")
        if len(writes) > 1:
            prev = writes[-2]
            start = prev.completion_time or prev.timestamp
            inc = table.read_incremental(start=start, columns=["txn_id", "_hoodie_commit_time"])
            print(f"incremental since {start}: {inc.to_pylist()}")
        us = table.read(columns=["txn_id"], filters=[("region", "=", "us")])
        print(f"filter region = 'us': {sorted(us.column('txn_id').to_pylist())}")
    return 0


def _print_rows(table) -> None:
    rows = [[str(v) for v in r.values()] for r in table.to_pylist()]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(table.column_names)]
    for line in [table.column_names] + rows:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(line, widths)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
