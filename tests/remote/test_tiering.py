"""Tiering on the real S3 server: rolled segments below the last stable offset are copied and
committed; the local copies go after local retention; the plan refuses a gap."""

from __future__ import annotations

import pytest

from storage_engine.remote.access import remote_partition
from storage_engine.remote.local_state import STATE_FILE, recall
from storage_engine.remote.tiering import TieringGapError, plan_tiering, tier_partition
from tests.helpers.engine import append_each, open_topic, records


def test_tiering_copies_rolled_segments_and_releases_local_copies(remote_env, tmp_path) -> None:
    manager = open_topic(tmp_path / "logs", segment_bytes=300, remote_storage_enable="true",
                         local_retention_ms=1000)
    log = manager.get_log("t", 0)
    append_each(log, records(30))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3
    rp = remote_partition("t", 0, log.config)
    result = tier_partition(log, rp, now_ms=10**6, release_local=False)
    version = rp.latest()
    assert result.status == "tiered" and version is not None and version.version == 1
    assert [s.base_offset for s in version.segments] == bases[:-1]
    assert version.end_offset == bases[-1] and rp.missing_objects(version) == []
    assert recall(log.dir, rp.store.url).version == 1
    again = tier_partition(log, rp, now_ms=10**6)  # nothing new to copy; the local copies now go
    assert again.version == 1 and again.local_release.deleted_segments == bases[:-1]
    assert log.log_start_offset == bases[-1] and rp.latest().version == 1


def test_plan_refuses_a_gap_and_stops_at_the_last_stable_offset() -> None:
    plan = plan_tiering("t", 0, [0, 10, 20, 30], log_start_offset=0, log_end_offset=35,
                        last_stable_offset=25, remote_end=None)
    assert plan.uploads == ((0, 10), (10, 20))
    with pytest.raises(TieringGapError, match="inside local segment 10"):
        plan_tiering("t", 0, [0, 10, 20], log_start_offset=0, log_end_offset=25, last_stable_offset=25,
                     remote_end=15)
    with pytest.raises(TieringGapError, match="in neither tier"):
        plan_tiering("t", 0, [20, 30], log_start_offset=20, log_end_offset=35, last_stable_offset=35,
                     remote_end=10)


def test_an_empty_tier_is_tiered_on_from_the_log_start() -> None:
    """A tier that retention or delete-records emptied ends where the log starts, which may be
    inside a local segment, or (a kill before the local log start moved) past the local one."""
    for local_start in (22, 0):
        plan = plan_tiering("t", 0, [0, 10, 20, 30, 40], log_start_offset=local_start, log_end_offset=45,
                            last_stable_offset=45, remote_end=22, remote_empty=True)
        assert plan.uploads == ((20, 30), (30, 40)) and plan.remote_end == 22
    with pytest.raises(TieringGapError, match="inside local segment 20"):  # a tier holding offsets must meet
        plan_tiering("t", 0, [0, 10, 20, 30, 40], log_start_offset=22, log_end_offset=45, last_stable_offset=45,
                     remote_end=22)


@pytest.mark.parametrize("body", [b"{not json", b"[" * 100_000, b'{"location": 1}'])
def test_a_remembered_state_that_does_not_parse_is_unknown(tmp_path, body) -> None:
    """The sensors' cache of the latest version: a file that does not parse exactly is no state
    (the tier is then unknown until the next commit), never an error of the tick."""
    (tmp_path / STATE_FILE).write_bytes(body)
    assert recall(tmp_path, "s3://b/p") is None


def test_a_changed_location_is_refused_before_a_second_tier_starts(remote_env, tmp_path, monkeypatch) -> None:
    """A partition tiered at one location refuses another: tiering there would start a second,
    empty tier and hide the first's records, whose local copies may be gone."""
    manager = open_topic(tmp_path / "logs", segment_bytes=300, remote_storage_enable="true")
    log = manager.get_log("t", 0)
    append_each(log, records(30))
    tier_partition(log, remote_partition("t", 0, log.config), now_ms=10**6)
    monkeypatch.setenv("LOGPLAT_REMOTE_STORAGE", remote_env["LOGPLAT_REMOTE_STORAGE"] + "-elsewhere")
    from storage_engine.remote.access import open_store
    from storage_engine.remote.errors import RemoteStorageError
    from storage_engine.remote.partition import RemotePartition

    elsewhere = RemotePartition(open_store(), "t", 0)
    with pytest.raises(RemoteStorageError, match="is tiered at .* set it back"):
        tier_partition(log, elsewhere, now_ms=10**6)
    assert elsewhere.latest() is None and elsewhere.store.list(elsewhere.prefix) == []
