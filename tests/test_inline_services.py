"""Table services run inline from write options, and through Table methods, on tables both
readers agree on."""

from __future__ import annotations

import hudi_format as hudi
from writemodel import Model, data_rows, hudi_rs_read, make_rows, model_rows


def test_inline_compaction_clean_and_archive(tmp_path):
    path = str(tmp_path / "t")
    opts = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "3",
            "hoodie.cleaner.commits.retained": "2", "hoodie.keep.min.commits": "4",
            "hoodie.keep.max.commits": "6"}
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ",
              options=opts)
    model = Model(True)
    for i in range(14):
        rows = make_rows(range(i * 3, i * 3 + 10), ts=i, seed=i)
        hudi.write(path, rows, **kw)
        model.apply("upsert", rows, i)
    table = hudi.open_table(path)
    actions = [i.action for i in table.timeline.completed]
    assert "commit" in actions          # compaction completed as a commit
    assert "clean" in actions
    assert len(table.timeline.write_instants()) <= 6 + 2   # archival keeps the timeline bounded
    assert table.timeline.archived().write_instants()
    assert data_rows(table.read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)


def test_table_service_methods(tmp_path):
    path = str(tmp_path / "t")
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ",
              options={"hoodie.parquet.small.file.limit": "0"})
    model = Model(True)
    for i in range(4):
        rows = make_rows(range(i * 5, i * 5 + 10), ts=i, seed=i)
        hudi.write(path, rows, **kw)
        model.apply("upsert", rows, i)
    table = hudi.open_table(path)
    before = len(table.file_slices())
    assert table.compact() is not None
    assert all(not s.log_files for s in table.file_slices())
    assert table.cluster(sort_by=["id"]) is not None
    assert len(table.file_slices()) < before
    table.clean()
    assert data_rows(table.read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)
