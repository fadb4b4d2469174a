"""Clustering beside writes in flight (v6 and v8): plans leave out their file groups, and neither side loses rows."""

from __future__ import annotations

import pytest

import hudi_format as hudi
from hudi_format.services import ServiceConflictError, cluster, run_clustering, schedule_clustering
from test_clustering import small_files
from test_compaction import both, write
from writemodel import make_rows


def _killed_upsert(path, monkeypatch, rows, version, jobs=None):
    """An upsert stopped after writing its files, before its commit: pending, markers left
    behind (``jobs`` receives its job, for the abort it would have run)."""
    import hudi_format.writer.client as client

    class Killed(BaseException):
        pass

    def die(job, *args, **kwargs):
        if jobs is not None:
            jobs.append(job)
        raise Killed()
    with monkeypatch.context() as m:
        m.setattr(client, "commit_write", die)
        m.setattr(client, "abort_write", lambda job: None)
        with pytest.raises(Killed):
            write(path, rows, version=version)
    pending = hudi.open_table(str(path)).timeline.pending
    assert len(pending) == 1
    return pending[0]


def _planned_groups(t, inst) -> set:
    plan = t.timeline.plan(inst)["clusteringPlan"]
    return {(s["partitionPath"], s["fileId"]) for g in plan["inputGroups"] for s in g["slices"]}


@pytest.mark.parametrize("version", [6, 8])
def test_clustering_leaves_out_file_groups_a_write_in_flight_touches(tmp_path, monkeypatch, version):
    """A write in flight appends to a file group: clustering it would abort that write at its
    commit (or be aborted by it), and in v6 its plan would name a log file the write's rollback
    deletes. The plan leaves such file groups out; the write's rollback then costs nothing."""
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", version)
    before = both(path)
    pending = _killed_upsert(path, monkeypatch, make_rows(range(0, 2), ts=70, seed=7), version)
    t = hudi.open_table(str(path))
    from hudi_format.transaction.markers import read_markers
    touched = set()
    for data, _ in read_markers(t.storage, pending.timestamp):
        part, name = data.rsplit("/", 1)
        touched.add((part, name.lstrip(".").split("_")[0]))
    assert touched
    inst = schedule_clustering(t.storage, t.config, "score",
                               {"hoodie.clustering.plan.strategy.max.num.groups": "30"})
    assert inst is not None
    planned = _planned_groups(hudi.open_table(str(path)), inst)
    assert planned and not planned & touched
    from hudi_format.services.rollback import rollback
    rollback(t.storage, t.config, pending.timestamp)
    assert run_clustering(t.storage, t.config).timestamp == inst.timestamp
    assert both(path) == before


def test_clustering_aborts_when_a_planned_log_file_is_rolled_back_under_it(tmp_path, monkeypatch):
    """v6 names a log file by its slice, not its writer, so a plan can name the log file of a
    write in flight (one that had not left its marker when the plan was made). When that write
    fails and removes its files while the clustering runs, the file is gone: the clustering
    aborts and drops its plan (a conflict, retried by the next clustering); no row is lost."""
    from hudi_format.services import clustering as cl
    from hudi_format.writer.job import abort_write
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 6)
    before = both(path)
    jobs = []
    _killed_upsert(path, monkeypatch, make_rows(range(0, 2), ts=70, seed=7), 6, jobs)
    t = hudi.open_table(str(path))
    monkeypatch.setattr(cl, "in_flight_file_groups", lambda ts: set())
    inst = schedule_clustering(t.storage, t.config, "score",
                               {"hoodie.clustering.plan.strategy.max.num.groups": "30"})
    plan = hudi.open_table(str(path)).timeline.plan(inst)
    logs = [p for g in plan["clusteringPlan"]["inputGroups"] for s in g["slices"] for p in s["deltaFilePaths"]]
    assert any(posixpath_name(p).startswith(".") for p in logs)
    read_group = cl._read_group

    def rolled_back_meanwhile(*args, **kwargs):
        # after the clustering checked its file groups, before it reads the first of them, the
        # write fails (at its conflict check, say) and removes what it wrote
        if jobs:
            abort_write(jobs.pop())
        return read_group(*args, **kwargs)
    monkeypatch.setattr(cl, "_read_group", rolled_back_meanwhile)
    monkeypatch.setattr(cl.os, "cpu_count", lambda: 1)   # groups one after another
    with pytest.raises(ServiceConflictError, match="is gone .*file not found"):
        run_clustering(t.storage, t.config)
    monkeypatch.undo()
    t = hudi.open_table(str(path))
    assert t.timeline.pending == []
    assert both(path) == before
    assert cluster(t.storage, t.config, "score") is not None
    assert both(path) == before


def posixpath_name(p: str) -> str:
    return p.rsplit("/", 1)[-1]


def test_a_log_only_file_group_of_a_pending_write_is_no_file_slice_v6(tmp_path, monkeypatch):
    """Version 6 names a log file after its slice's base instant; a file group a pending write
    started with log files only (Flink, bucket index) shows the write's own instant there.
    Hudi's view drops a slice whose base instant is not committed (``isFileSliceCommitted``):
    the storage-listed view of the services leaves it out, so no clustering plans it (its
    blocks would be read as nothing, and the write's rollback deletes the file under the plan)."""
    import shutil
    from hudi_format.services import clustering as cl
    from hudi_format.transaction.snapshot import TableSnapshot
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 6)
    before = both(path)
    pending = _killed_upsert(path, monkeypatch, make_rows(range(0, 2), ts=70, seed=7), 6)
    t = hudi.open_table(str(path))
    mine = next(path.rglob(".*.log.*"))
    orphan_id = "ffffffff-0000-0000-0000-000000000000-0"
    shutil.copy(mine, mine.with_name(f".{orphan_id}_{pending.timestamp}.log.1_0-1-0"))
    listed = {s.file_id for s in TableSnapshot(t.storage, t.config).latest_slices()}
    assert listed and orphan_id not in listed
    assert both(path) == before
    monkeypatch.setattr(cl, "in_flight_file_groups", lambda ts: set())   # no marker names it
    inst = schedule_clustering(t.storage, t.config, "score", {"hoodie.clustering.plan.strategy.max.num.groups": "30"})
    assert inst is not None
    planned = _planned_groups(hudi.open_table(str(path)), inst)
    assert planned and orphan_id not in {fid for _, fid in planned}


@pytest.mark.parametrize("version", [6, 8])
def test_a_write_in_flight_on_a_planned_group_neither_aborts_the_clustering_nor_commits(tmp_path, monkeypatch,
                                                                                      version):
    """A write planned before the clustering was, writes its log file into a planned file
    group (v6 names it after the slice, so storage lists it in the slice) and is still in
    flight when the clustering runs. The clustering checks its groups against what is
    *committed*: a file a pending write's marker names is no change, so the clustering
    completes; the write then loses its commit-time conflict check and leaves nothing. Before,
    the clustering saw a changed slice and aborted too: both lost (the v6 soak's aborted
    clusterings)."""
    import hudi_format.writer.client as client
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", version)
    before = both(path)
    t = hudi.open_table(str(path))
    real_write, real_commit, clustering = client.WriteClient._write_buckets, client.commit_write, []

    def schedule_then_write(self, job, buckets):      # the write has planned; no file written yet
        clustering.append(schedule_clustering(t.storage, t.config, "score",
                                              {"hoodie.clustering.plan.strategy.max.num.groups": "30"}))
        return real_write(self, job, buckets)

    def cluster_then_commit(job, results, *a, **k):   # its files written, the write still pending
        mine = {(r.partition, r.stat.file_id) for r in results}
        assert mine & _planned_groups(hudi.open_table(str(path)), clustering[0])
        clustering.append(run_clustering(t.storage, t.config, clustering[0].timestamp))
        return real_commit(job, results, *a, **k)
    monkeypatch.setattr(client.WriteClient, "_write_buckets", schedule_then_write)
    monkeypatch.setattr(client, "commit_write", cluster_then_commit)
    with pytest.raises(hudi.ConcurrentWriteError, match="conflicts with"):
        write(path, make_rows(range(0, 2), ts=70, seed=7), version=version)
    after = hudi.open_table(str(path))
    assert clustering[1] is not None and after.timeline.pending == []
    assert clustering[1].timestamp in {i.timestamp for i in after.timeline.completed}
    assert both(path) == before


def test_a_write_beginning_while_a_clustering_plans_is_left_out_of_the_plan(tmp_path, monkeypatch):
    """A write that begins after the clustering listed the timeline but before it listed the
    file slices (v6: its log file is then in the slice the plan would name) is seen by the
    pending writes and markers listed after the slices, and its file groups are left out."""
    from hudi_format.transaction.markers import read_markers
    from hudi_format.transaction.snapshot import TableSnapshot
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 6)
    real, began = TableSnapshot.latest_slices, []

    def begin_a_write_then_list(self, *a, **k):
        if not began:
            began.append(None)
            began.append(_killed_upsert(path, monkeypatch, make_rows(range(0, 2), ts=70, seed=7), 6))
        return real(self, *a, **k)
    monkeypatch.setattr(TableSnapshot, "latest_slices", begin_a_write_then_list)
    t = hudi.open_table(str(path))
    inst = schedule_clustering(t.storage, t.config, "score", {"hoodie.clustering.plan.strategy.max.num.groups": "30"})
    touched = {(data.rsplit("/", 1)[0], posixpath_name(data).lstrip(".").split("_")[0])
               for data, _ in read_markers(t.storage, began[1].timestamp)}
    assert touched and inst is not None
    planned = _planned_groups(hudi.open_table(str(path)), inst)
    assert planned and not planned & touched


def test_a_write_aborting_while_a_clustering_plans_is_left_out_of_the_plan(tmp_path, monkeypatch):
    """A write in flight whose files the clustering listed in its slices, and which aborted
    (files, then instant and markers removed) before the clustering listed the writes in
    flight: its file is gone, so its file group is left out of the plan, instead of a plan
    naming a file that is not there (the clustering then aborted when it ran: the v6 soak)."""
    from hudi_format.transaction.snapshot import TableSnapshot
    from hudi_format.writer.job import abort_write
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 6)
    before = both(path)
    jobs = []
    _killed_upsert(path, monkeypatch, make_rows(range(0, 2), ts=70, seed=7), 6, jobs)
    real = TableSnapshot.latest_slices

    def list_then_abort_the_write(self, *a, **k):
        listed = real(self, *a, **k)
        if jobs:
            abort_write(jobs.pop())
        return listed
    monkeypatch.setattr(TableSnapshot, "latest_slices", list_then_abort_the_write)
    t = hudi.open_table(str(path))
    inst = schedule_clustering(t.storage, t.config, "score", {"hoodie.clustering.plan.strategy.max.num.groups": "30"})
    monkeypatch.setattr(TableSnapshot, "latest_slices", real)
    assert not jobs and inst is not None
    assert run_clustering(t.storage, t.config, inst.timestamp) is not None
    assert both(path) == before


def test_a_write_in_flight_aborting_while_the_clustering_reads_does_not_abort_it(tmp_path, monkeypatch):
    """The clustering reads the files its plan names (with today's sizes), not a log file a
    write in flight added to a planned group since: that write may abort and remove it while
    the clustering reads (v6 soak: "a file it planned to rewrite is gone")."""
    import hudi_format.writer.client as client
    from hudi_format.services import clustering as cl
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 6)
    before = both(path)
    t = hudi.open_table(str(path))
    real_write, real_commit, real_read, clustering = client.WriteClient._write_buckets, client.commit_write, \
        cl._read_group, []

    def schedule_then_write(self, job, buckets):
        clustering.append(schedule_clustering(t.storage, t.config, "score",
                                              {"hoodie.clustering.plan.strategy.max.num.groups": "30"}))
        return real_write(self, job, buckets)

    def cluster_then_commit(job, results, *a, **k):
        mine = [r.stat.path for r in results]

        def abort_then_read(*ra, **rk):      # the write gives up while the clustering reads
            for rel in mine:
                if t.storage.exists(rel):
                    t.storage.delete(rel)
            return real_read(*ra, **rk)
        monkeypatch.setattr(cl, "_read_group", abort_then_read)
        clustering.append(run_clustering(t.storage, t.config, clustering[0].timestamp))
        return real_commit(job, results, *a, **k)
    monkeypatch.setattr(client.WriteClient, "_write_buckets", schedule_then_write)
    monkeypatch.setattr(client, "commit_write", cluster_then_commit)
    with pytest.raises(hudi.ConcurrentWriteError, match="conflicts with"):
        write(path, make_rows(range(0, 2), ts=70, seed=7), version=6)
    assert clustering[1] is not None and hudi.open_table(str(path)).timeline.pending == []
    assert both(path) == before
