"""Tiering and tiered retention under kills, with real processes and the real S3 server.

A subprocess tiers (``tier_partitions``) or retains (``retain_tiered``) with
``tests.helpers.crash.crash_env(point)`` and SIGKILLs itself at that step: an upload, the commit,
the remote retention's commit, or the local release's checkpoint and renames. After each kill
the latest version is readable and complete (every object it names exists), the local log
reopens and verifies clean, and running again completes to the state an uninterrupted run
reaches.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from storage_engine.logdir.manager import LogManager
from storage_engine.remote.access import open_store
from storage_engine.remote.partition import RemotePartition
from storage_engine.remote.reads import tiered_log
from storage_engine.remote.tier_runs import retain_tiered, tier_partitions
from storage_engine.tools.verify import verify_partition
from tests.helpers.crash import crash_env
from tests.helpers.engine import append_each, open_topic, records

RUN = textwrap.dedent("""
    import sys
    from storage_engine.logdir.manager import LogManager
    from storage_engine.remote.tier_runs import retain_tiered, tier_partitions
    with LogManager([sys.argv[1]]) as m:
        run = tier_partitions if sys.argv[2] == "tier" else retain_tiered
        run(m, "t", now_ms=int(sys.argv[3]))
""")
LATER = 10**7  # past local.retention.ms and retention.ms of every record
LOCAL_RELEASE = ["retention.after-checkpoint", "remove-segments.after-rename-0"]
CASES = ([("tier", p) for p in ["tier.after-upload", "tier.after-commit", *LOCAL_RELEASE]]
         + [("retention", p) for p in ["remote-retention.before-commit", "remote-retention.after-commit",
                                       *LOCAL_RELEASE]])


def build(root) -> list[int]:
    """A tiered partition of several segments; for a retention case, already tiered with no copy
    released (its records are young at clock 0)."""
    with open_topic(root, segment_bytes=300, remote_storage_enable="true", local_retention_ms=1000,
                    retention_ms=1000, file_delete_delay_ms=0) as m:
        log = m.get_log("t", 0)
        append_each(log, records(30))
        return [s.base_offset for s in log.segments]


@pytest.mark.parametrize(("run", "point"), CASES)
def test_a_kill_at_each_step_leaves_both_tiers_consistent_and_a_rerun_completes(remote_env, tmp_path, run, point):
    bases = build(tmp_path)
    end = bases[-1]
    if run == "retention":
        with LogManager([tmp_path]) as m:
            tier_partitions(m, "t", now_ms=0)
    proc = subprocess.run([sys.executable, "-c", RUN, str(tmp_path), run, str(LATER)], env=crash_env(point),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, (point, proc.returncode, proc.stderr)  # every point is reached
    rp = RemotePartition(open_store(), "t", 0)
    latest = rp.latest()
    if latest is not None:  # none only when the kill came before the first commit
        assert rp.missing_objects(latest) == [], point
    with LogManager([tmp_path]) as m:
        report = verify_partition(m, "t", 0)
        assert report.ok, (point, report.problems)
        local_start = m.get_log("t", 0).log_start_offset
        assert latest is None or local_start <= latest.end_offset, point  # no offset in neither tier
        # the run again, to the end an uninterrupted run reaches
        if run == "tier":
            (result,) = tier_partitions(m, "t", now_ms=LATER)
            assert result.status in ("tiered", "nothing") and result.remote_end_offset == end, result
        else:
            assert all(r.status in ("deleted", "nothing") for r in retain_tiered(m, "t", now_ms=LATER)), point
        final = rp.latest()
        assert rp.missing_objects(final) == [] and final.end_offset == end
        assert m.get_log("t", 0).log_start_offset == end
        assert final.log_start_offset == (end if run == "retention" else 0)
        assert final.version == (2 if run == "retention" else 1)


@pytest.mark.parametrize("point", ["remote-retention.before-commit", "remote-retention.after-commit"])
def test_a_kill_in_delete_records_past_the_tier_end_leaves_the_log_readable_and_a_rerun_completes(
        remote_env, tmp_path, point):
    """``logctl delete-records`` past the remote tier's end, past a whole local segment above it,
    killed before or after its remote commit (the local log start not moved yet): the latest
    version is complete, the partition reads from the log start the versions say, without a
    gap, and the command run again completes both tiers."""
    bases = build(tmp_path)
    with LogManager([tmp_path]) as m:
        tier_partitions(m, "t", now_ms=0)  # nothing released: the records are young at clock 0
        append_each(m.get_log("t", 0), records(12, start=30))
        above = [s.base_offset for s in m.get_log("t", 0).segments if s.base_offset >= bases[-1]]
    target = above[1] + 1
    argv = [sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(tmp_path), "delete-records", "t",
            "--partition", "0", "--before-offset", str(target)]
    proc = subprocess.run(argv, env=crash_env(point), capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, (point, proc.returncode, proc.stderr)
    rp = RemotePartition(open_store(), "t", 0)
    latest = rp.latest()
    assert rp.missing_objects(latest) == []
    start = target if point.endswith("after-commit") else 0
    with LogManager([tmp_path]) as m:
        view = tiered_log(m.get_log("t", 0))
        assert view.log_start_offset == start
        assert [r.offset for r in view.records_from(start)] == list(range(start, 42)), point
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    final = rp.latest()
    assert final.log_start_offset == final.end_offset == target and rp.missing_objects(final) == []
    with LogManager([tmp_path]) as m:
        assert m.get_log("t", 0).log_start_offset == target and verify_partition(m, "t", 0).ok
        (tiered,) = tier_partitions(m, "t", now_ms=0)
        assert tiered.status == "tiered" and tiered.remote_log_start_offset == target, tiered
