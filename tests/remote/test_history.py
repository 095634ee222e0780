"""History and restore on the real S3 server: the versions listed with what each did and
whether it is retained and readable; a restore re-commits an older version's records exactly,
keeps a newer tail at a segment boundary, and refuses (writing nothing) what it cannot do."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from storage_engine.remote.history import read_history, version_rows
from storage_engine.remote.local_state import recall
from storage_engine.remote.names import new_writer_id
from storage_engine.remote.partition import wall_clock_ms
from storage_engine.remote.restore import RestoreRefusedError, restore
from tests.helpers.cli import run_logctl
from tests.remote.history_scenario import tiered, version_records


def test_versions_lists_each_change_retained_and_readable(remote_env, tmp_path, monkeypatch, capsys) -> None:
    t = tiered(tmp_path / "logs")
    v1 = t.rp.latest()
    v2 = t.retention()
    rows = version_rows(read_history(t.rp), now_ms_wall=wall_clock_ms(), retention_ms=t.config.logplat_remote_version_retention_ms)
    assert [(r.version, r.operation, r.retained, r.readable) for r in rows] == [(1, "tier", True, True),
                                                                              (2, "retention", True, True)]
    assert rows[0].size_bytes == v1.size_bytes and rows[0].superseded_ms == v2.committed_ms
    assert rows[1].segments == len(v1.segments) - 2 and rows[1].log_start_offset == v1.segments[2].base_offset
    short = version_rows(read_history(t.rp), now_ms_wall=wall_clock_ms(), retention_ms=0)
    assert [r.retained for r in short] == [False, True]  # the latest is always retained
    t.rp.store.delete(t.rp.name(v1.segments[0].log))
    t.manager.close()
    code, out, err = run_logctl(t.root, monkeypatch, capsys, "versions", "t", "--partition", "0", "--json")
    assert code == 0, err
    listed = json.loads(out)["versions"]
    assert [(v["version"], v["readable"]) for v in listed] == [(1, False), (2, True)]
    assert listed[0]["summary"]["to_offset"] == v1.end_offset
    code, out, _ = run_logctl(t.root, monkeypatch, capsys, "versions", "t", "--partition", "0")
    assert code == 0 and "objects gone" in out.splitlines()[1] and "latest" in out.splitlines()[2]


def test_restore_commits_the_older_records_as_a_new_version(remote_env, tmp_path, monkeypatch, capsys) -> None:
    t = tiered(tmp_path / "logs")
    v1 = t.rp.latest()
    t.retention()
    part_dir = t.manager.get_log("t", 0).dir
    t.manager.close()
    code, out, err = run_logctl(t.root, monkeypatch, capsys, "restore", "t", "--partition", "0", "--version", "1",
                                "--json")
    assert code == 0, err
    assert json.loads(out)["remote_version"] == 3
    v3 = t.rp.latest()
    assert v3.operation == "restore" and v3.summary["restored_version"] == 1
    assert version_records(t.rp, v3) == version_records(t.rp, v1) and len(version_records(t.rp, v1)) > 0
    assert v3.segments == v1.segments and v3.log_start_offset == v1.log_start_offset and not v3.released
    assert t.rp.missing_objects(v3) == [] and t.pins() == []  # the pin went after the commit
    assert recall(part_dir, t.rp.store.url).version == 3


def test_restore_keeps_the_newer_tail_at_a_segment_boundary(remote_env, tmp_path) -> None:
    t = tiered(tmp_path / "logs")
    v1 = t.rp.latest()
    v2 = t.tier_more()
    assert v2.end_offset > v1.end_offset
    t.retention()
    result = restore(t.rp, t.config, 1)
    v4 = t.rp.latest()
    assert result.version == 4 and result.appended_segments == [s.base_offset for s in v2.segments[len(v1.segments):]]
    assert version_records(t.rp, v4) == version_records(t.rp, v2)  # no offset lost, none repeated
    assert v4.end_offset == v2.end_offset and v4.producer_snapshot == v2.producer_snapshot


def test_restore_refuses_what_it_cannot_do_and_writes_nothing(remote_env, tmp_path, monkeypatch, capsys) -> None:
    t = tiered(tmp_path / "logs")
    v2 = t.tier_more()
    merged = replace(v2.segments[0], end_offset=v2.end_offset)  # a compaction that merged every segment
    t.rp.commit(v2.successor(writer=new_writer_id(), operation="compact", committed_ms=wall_clock_ms(),
                             release_horizon_ms=0, summary={}, segments=(merged,)))
    before = t.names()
    cases = [(1, "no segment of it starting at"), (3, "is the latest"), (9, r"has no version 9 \(stored: 1-3\)")]
    for number, why in cases:
        with pytest.raises(RestoreRefusedError, match=why):
            restore(t.rp, t.config, number)
    with pytest.raises(RestoreRefusedError, match="no longer retained"):
        restore(t.rp, replace(t.config, logplat_remote_version_retention_ms=0), 2)
    t.rp.store.delete(t.rp.name(v2.segments[-1].index))
    before.discard(v2.segments[-1].index)
    with pytest.raises(RestoreRefusedError, match="objects are gone"):
        restore(t.rp, t.config, 2)
    assert t.names() == before and t.rp.latest().version == 3
    t.manager.close()
    code, out, err = run_logctl(t.root, monkeypatch, capsys, "restore", "t", "--partition", "0", "--version", "1")
    assert code == 1 and out == "" and err.count("\n") == 1 and "would lose or repeat offsets" in err
    assert t.names() == before
    code, out, err = run_logctl(t.root, monkeypatch, capsys, "restore", "t", "--partition", "0", "--version",
                                str(2**31))  # a version number is no count: --as-of-version takes any
    assert code == 1 and "has no version 2147483648" in err and t.names() == before
