"""Reads across tiers on the real S3 server: a tiered partition, its local copies partly
released, reads exactly the records of the same log untiered; an older version reads as it was;
a segment object gone or short is a one-line error naming it."""

from __future__ import annotations

import pytest

from storage_engine.errors import OffsetOutOfRangeError
from storage_engine.remote.access import remote_partition
from storage_engine.remote.errors import RemoteStorageError
from storage_engine.remote.reads import remote_segment_batches, tiered_log
from storage_engine.remote.tiering import tier_partition
from tests.helpers.engine import append_each, open_topic, records

N = 60


def _rows(recs) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in recs]


@pytest.fixture
def pair(remote_env, tmp_path):
    """(tiered view, untiered log) of the same 60 records: the tiered one's rolled segments are
    remote and the local copies of all but the last few released."""
    manager = open_topic(tmp_path / "logs", "t", segment_bytes=400, index_interval_bytes=1,
                         remote_storage_enable="true", local_retention_bytes=900)
    manager.admin.create_topic("u", 1, {"segment.bytes": "400", "index.interval.bytes": "1"})
    tiered, plain = manager.get_log("t", 0), manager.get_log("u", 0)
    recs = records(N, ts=10_000)
    append_each(tiered, recs)
    append_each(plain, recs)
    result = tier_partition(tiered, remote_partition("t", 0, tiered.config), now_ms=100_000)
    assert result.local_release is not None and result.local_release.deleted_segments  # some copies released
    view = tiered_log(tiered)
    assert view.version is not None and tiered.log_start_offset > 0  # partly released...
    assert tiered.log_start_offset < view.tier_end  # ... with shadowed copies still local
    yield view, plain
    manager.close()


def test_a_tiered_partition_reads_as_the_same_log_untiered(pair) -> None:
    view, plain = pair
    assert (view.log_start_offset, view.log_end_offset) == (0, N)
    seg = view.version.segments[1]
    inside = seg.base_offset + 1
    assert inside < seg.end_offset - 1
    for start in (0, inside, view.tier_end - 1, view.tier_end, N - 1, N):
        assert _rows(view.records_from(start)) == _rows(plain.read(start, max_records=N)), start
    batches = list(view.batches_from(0))
    assert [b.header.base_offset for b in batches] == list(range(N))  # offsets continue across the boundary
    with pytest.raises(OffsetOutOfRangeError):
        next(view.batches_from(N + 1))


def test_offset_for_timestamp_across_tiers(pair) -> None:
    view, plain = pair
    for ts in (-2, -1, -3, 0, 10_000, 10_003, 10_000 + view.tier_end - 1, 10_000 + view.tier_end, 10_000 + N - 1,
               10_000 + N):
        assert view.offset_for_timestamp(ts) == plain.offset_for_timestamp(ts), ts


def test_a_segment_object_gone_or_short_is_an_error_naming_it(pair) -> None:
    view, _ = pair
    rp, seg = view.remote, view.version.segments[0]
    data = rp.read(seg.log)
    rp.store.delete(rp.name(seg.log))
    with pytest.raises(RemoteStorageError, match=rf"{seg.log}: gone from the remote tier"):
        list(view.records_from(0))
    rp.store.put_new(rp.name(seg.log), data[:-10])
    with pytest.raises(RemoteStorageError, match=rf"{seg.log}: {len(data) - 10} bytes, shorter than its recorded"):
        list(remote_segment_batches(rp, seg))
    with pytest.raises(RemoteStorageError, match="shorter than its recorded"):
        list(remote_segment_batches(rp, seg, seg.base_offset + 1))
