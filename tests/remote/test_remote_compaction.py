"""Compaction of the remote tier on the real S3 server: the engine's cleaner on a materialized
version, committed as a ``compact`` version, routed by ``LogCleaner`` for a tiered topic."""

from __future__ import annotations

from storage_engine.cleaner import LogCleaner
from storage_engine.cleaner.remote_cleaning import clean_remote_partition
from storage_engine.remote.access import remote_partition
from storage_engine.remote.local_state import recall
from storage_engine.remote.materialize import materialize
from storage_engine.remote.tiering import tier_partition
from tests.helpers.engine import append_each, open_topic, records

NOW = 10**12


def test_materialize_lays_out_a_partition_dir(remote_env, tmp_path) -> None:
    manager = open_topic(tmp_path / "logs", segment_bytes=400, remote_storage_enable="true", cleanup_policy="compact")
    log = manager.get_log("t", 0)
    append_each(log, records(30, keys=5))
    rp = remote_partition("t", 0, log.config)
    tier_partition(log, rp, NOW, release_local=False)
    version = rp.latest()
    part = materialize(rp, version, tmp_path / "scratch")
    names = sorted(p.name for p in part.iterdir())
    bases = [s.base_offset for s in version.segments]
    assert f"{version.end_offset:020d}.log" in names and (part / f"{version.end_offset:020d}.log").stat().st_size == 0
    for seg in version.segments:
        path = part / f"{seg.base_offset:020d}.log"
        assert path.stat().st_size == seg.size_bytes and int(path.stat().st_mtime * 1000) == seg.mtime_ms
    assert len(bases) == len([n for n in names if n.endswith(".log")]) - 1


def test_tiered_topic_is_compacted_on_the_remote_tier(remote_env, tmp_path) -> None:
    manager = open_topic(tmp_path / "logs", segment_bytes=400, remote_storage_enable="true", cleanup_policy="compact")
    log = manager.get_log("t", 0)
    append_each(log, records(60, keys=5))
    report = LogCleaner(manager).compact("t", 0, now_ms=NOW)
    assert report.status == "compacted", report.reason
    rp = remote_partition("t", 0, log.config)
    version = rp.latest()
    assert version.operation == "compact" and report.remote_version == version.version == 2
    assert rp.missing_objects(version) == []
    assert recall(log.dir, rp.store.url).version == 2
    assert version.cleaner_checkpoint == version.end_offset
    assert report.requests["requests_put"] >= 1
    again = clean_remote_partition(rp, log.config, now_ms=NOW, force=False, scratch_dir=tmp_path / "s2")
    assert again.status == "skipped" and again.remote_version == 2
    assert not list((tmp_path / "s2").iterdir())
