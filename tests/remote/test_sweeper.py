"""The sweep on the real S3 server: it keeps every object a retained or pinned version names,
deletes released objects only after file.delete.delay.ms, orphans only past the floor (a lost
race's uploads among them), expired versions after their objects, and nothing at all when a
version does not parse; a reader holding version N reads it all meanwhile."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from storage_engine.remote.names import data_name, new_writer_id, pin_name, version_name
from storage_engine.remote.partition import ORPHAN_MIN_AGE_MS, close_files, open_segment_files, wall_clock_ms
from storage_engine.remote.pins import pin, unpin
from storage_engine.remote.sweeper import sweep_partition
from tests.helpers.cli import run_logctl
from tests.remote.history_scenario import tiered, version_records

DELAY = 60_000


def _released(v1, v2) -> set[str]:
    return v1.objects - v2.objects


def test_released_objects_go_after_the_delay_and_never_while_retained_or_pinned(remote_env, tmp_path) -> None:
    t = tiered(tmp_path / "logs", file_delete_delay_ms=DELAY)
    v1 = t.rp.latest()
    v2 = t.retention()
    everything = t.names()
    now = wall_clock_ms()
    kept = sweep_partition(t.rp, t.config, now_ms_wall=now + 10 * DELAY)  # v1 retained (7 days)
    assert kept.status == "nothing" and kept.kept["retained"] == len(v1.objects) and t.names() == everything
    short = replace(t.config, logplat_remote_version_retention_ms=0)
    waiting = sweep_partition(t.rp, short, now_ms_wall=now + DELAY // 2)  # released, within the delay
    assert waiting.status == "nothing" and waiting.kept["waiting"] == len(_released(v1, v2))
    held = pin(t.rp, 1, new_writer_id(), now_ms_wall=now)
    pinned = sweep_partition(t.rp, short, now_ms_wall=now + 2 * DELAY)
    assert pinned.deleted == [] and t.names() == everything | {held.name}
    unpin(t.rp, held)
    dry = sweep_partition(t.rp, short, now_ms_wall=now + 2 * DELAY, dry_run=True)
    assert dry.status == "planned" and t.names() == everything
    done = sweep_partition(t.rp, short, now_ms_wall=now + 2 * DELAY)
    assert done.status == "deleted" and [d.to_dict() for d in done.deleted] == [d.to_dict() for d in dry.deleted]
    assert {d.name for d in done.deleted} == _released(v1, v2) | {version_name(1)}
    assert t.rp.version_numbers() == [2] and t.rp.missing_objects(t.rp.latest()) == []
    assert t.names() == everything - _released(v1, v2) - {version_name(1)}


def test_orphans_go_past_the_floor_a_lost_race_included(remote_env, tmp_path) -> None:
    t = tiered(tmp_path / "logs")
    v1 = t.rp.latest()
    seg = t.manager.get_log("t", 0).segments[-1]
    files = open_segment_files(seg)
    try:  # uploaded, never committed: the race's loser
        loser = t.rp.upload_segment(new_writer_id(), base_offset=v1.end_offset, end_offset=v1.end_offset + 1,
                                    max_timestamp=0, mtime_ms=0, files=files)
    finally:
        close_files(files)
    stray = "data/not-ours.bin"
    t.rp.store.put_new(t.rp.name(stray), b"x")
    now = wall_clock_ms()
    young = sweep_partition(t.rp, t.config, now_ms_wall=now)
    assert young.deleted == [] and young.kept["young_orphans"] == 3 and young.unrecognized == [stray]
    old = sweep_partition(t.rp, t.config, now_ms_wall=now + ORPHAN_MIN_AGE_MS + 1000)
    assert {d.name: d.reason for d in old.deleted} == {name: "orphan" for name in loser.objects}
    assert stray in t.names() and t.rp.missing_objects(v1) == []


NESTED = b"[" * 100_000  # deeper than Python's JSON decoder recurses


@pytest.mark.parametrize(("name", "body"), [
    (version_name(3), b"{not json"), (version_name(3), NESTED), (pin_name(1, "0123456789abcdef"), NESTED)])
def test_a_version_or_pin_that_does_not_parse_stops_every_deletion(remote_env, tmp_path, name, body) -> None:
    t = tiered(tmp_path / "logs", file_delete_delay_ms=0, logplat_remote_version_retention_ms=0)
    t.retention()
    t.rp.store.put_new(t.rp.name(data_name(0, new_writer_id(), "log")), b"orphan")
    t.rp.store.put_new(t.rp.name(name), body)
    everything = t.names()
    result = sweep_partition(t.rp, t.config, now_ms_wall=wall_clock_ms() + 10 * ORPHAN_MIN_AGE_MS, orphan_min_age_ms=0)
    assert result.status == "failed" and "nothing deleted" in result.reason and name in result.reason
    assert "\n" not in result.reason and t.names() == everything


def test_a_reader_holding_a_version_reads_it_all_while_the_next_commits_and_the_sweep_runs(remote_env,
                                                                                          tmp_path) -> None:
    t = tiered(tmp_path / "logs", file_delete_delay_ms=DELAY, logplat_remote_version_retention_ms=0)
    held = t.rp.latest()
    expected = version_records(t.rp, held)
    t.retention()
    result = sweep_partition(t.rp, t.config, now_ms_wall=wall_clock_ms(), orphan_min_age_ms=0)
    assert result.deleted == [] and result.kept["waiting"] > 0
    assert version_records(t.rp, held) == expected and t.rp.missing_objects(held) == []


def test_logctl_sweep_rows_and_refusals(remote_env, tmp_path, monkeypatch, capsys) -> None:
    """``logctl sweep`` keeps a young unnamed upload (a writer may still commit it), deletes what a
    version released once the delay has passed, and refuses a floor below ``ORPHAN_MIN_AGE_MS``."""
    t = tiered(tmp_path / "logs", file_delete_delay_ms=0, logplat_remote_version_retention_ms=0)
    v1 = t.rp.latest()
    released = _released(v1, t.retention())
    orphan = data_name(0, new_writer_id(), "log")
    t.rp.store.put_new(t.rp.name(orphan), b"o")
    t.manager.admin.create_topic("plain", 1, {})
    t.manager.close()
    code, out, err = run_logctl(t.root, monkeypatch, capsys, "sweep", "--dry-run")
    assert code == 0 and out.startswith(f"t-0: would delete {len(released) + 1} object(s) ({len(released)} released, "
                                        "1 version)") and "1 young orphans" in out, (out, err)
    assert orphan in t.names() and released <= t.names()
    code, out, err = run_logctl(t.root, monkeypatch, capsys, "sweep", "--json")
    rows = json.loads(out)["partitions"]
    assert code == 0 and [(r["topic"], r["status"]) for r in rows] == [("t", "deleted")]
    assert {d["name"] for d in rows[0]["deleted"] if d["reason"] == "released"} == released
    assert orphan in t.names() and not released & t.names()
    code, out, err = run_logctl(t.root, monkeypatch, capsys, "sweep", "--orphan-min-age-ms", "0")
    assert code == 1 and out == "" and str(ORPHAN_MIN_AGE_MS) in err and err.count("\n") == 1
    code, out, err = run_logctl(t.root, monkeypatch, capsys, "sweep", "--topic", "plain")
    assert code == 1 and out == "" and "remote.storage.enable=false" in err and err.count("\n") == 1


def test_a_sweeps_request_counts_are_its_own(remote_env, tmp_path) -> None:
    """A run over many partitions shares one store: each row counts its partition's requests
    (pins, versions and data listed, a GET per version), not the run's so far."""
    t = tiered(tmp_path / "logs")
    first = sweep_partition(t.rp, t.config, now_ms_wall=wall_clock_ms())
    second = sweep_partition(t.rp, t.config, now_ms_wall=wall_clock_ms())
    assert first.requests == second.requests and first.requests["requests_list"] == 3
