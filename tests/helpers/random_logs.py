"""Random compacted logs for differential tests of tiered compaction: the same log written
untiered and tiered (``remote.storage.enable``), compacted round after round at a rising clock,
must keep the same records. One generator for every engine that compacts the tiered copy (the
local ``LogCleaner``, the Spark job), so each is held to the untiered local cleaner.

A log is its first segments, written raw (batches of a few records in any codec, some inside a
committed or aborted transaction whose marker follows), then rounds of appended batches, a
roll, a clock advance and one compaction of each copy. Records carry a version header, so the
``header`` strategy (KIP-280) has something to order by.
"""

from __future__ import annotations

import os
import struct
import uuid
from collections.abc import Callable
from pathlib import Path

from hypothesis import strategies as st

from storage_engine.cleaner import CompactionReport, LogCleaner
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType, Record, encode_batch
from storage_engine.remote.access import remote_partition
from storage_engine.remote.location import ENV_REMOTE_STORAGE
from storage_engine.remote.materialize import materialize
from tests.helpers.cleaner import NOW, marker, raw_log

KEYS = [f"k{i}" for i in range(6)]
VERSION_HEADER = "ver"
# key, value (None: tombstone), timestamp delta, header version
record = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.text(alphabet="xyz", max_size=6)),
                   st.integers(-500, 500), st.integers(-3, 3))
codec = st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
# the first segments, written raw: batches (records, codec, transaction: None, committed or
# aborted: then its marker follows), a few per segment
txn_batch = st.tuples(st.lists(record, min_size=1, max_size=4), codec, st.sampled_from([None, None, "commit", "abort"]))
# later rounds, appended: batches (records, codec), then a compaction after a clock advance
rounds = st.lists(st.tuples(st.lists(st.tuples(st.lists(record, min_size=1, max_size=4), codec), max_size=8),
                            st.integers(0, 3000)), min_size=1, max_size=4)

#: compacts topic ``t`` partition 0 of a manager at ``now_ms``, returning its report
Compactor = Callable[[LogManager, int], CompactionReport]


def local_compactor(manager: LogManager, now_ms: int) -> CompactionReport:
    """The local engine's compaction of ``t``-0 (tiered or not: ``LogCleaner`` routes it)."""
    return LogCleaner(manager).compact("t", 0, now_ms=now_ms)


def _headers(version: int) -> tuple:
    return ((VERSION_HEADER, struct.pack(">q", version)),)


def _raw_segments(batches, per_segment: int) -> list[list[bytes]]:
    segments: list[list[bytes]] = [[]]
    offset = 0
    for n, (recs, kind, txn) in enumerate(batches):
        if len(segments[-1]) >= per_segment:
            segments.append([])
        data = [Record(offset + i, NOW + dt, k.encode(), None if v is None else v.encode(), _headers(ver))
                for i, (k, v, dt, ver) in enumerate(recs)]
        pid = 100 + n if txn else -1
        segments[-1].append(encode_batch(data, base_offset=offset, producer_id=pid, producer_epoch=0 if txn else -1,
                                         base_sequence=0 if txn else -1, is_transactional=txn is not None,
                                         compression=kind))
        offset += len(recs)
        if txn:
            segments[-1].append(marker(offset, pid, 0, commit=txn == "commit"))
            offset += 1
    return segments


def local_records(log, start: int, end: int | None = None) -> list[tuple]:
    """``log``'s records from ``start`` (to ``end``) as (offset, key, value, headers, timestamp)."""
    log.refresh()
    if log.log_end_offset <= start:
        return []
    out = log.read(max(start, log.log_start_offset), max_records=10**9, max_bytes=1 << 26)
    return [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in out if end is None or r.offset < end]


def tiered_records(log, rp, scratch: Path) -> list[tuple]:
    """The logical log of a tiered partition: the latest version's records, then the local
    log's from the tier's end."""
    version = rp.latest()
    if version is None:
        return local_records(log, 0)
    materialize(rp, version, scratch)
    with LogManager([scratch], topic_configs={"t": log.config}) as m:
        remote = local_records(m.get_log("t", 0), version.log_start_offset, version.end_offset)
    return [*remote, *local_records(log, version.end_offset)]


def differential(tmp_path: Path, remote_url: str, batches, per_segment: int, rounds, segment_bytes: int,
                 retention: int, strategy: str, *, compact_tiered: Compactor = local_compactor) -> None:
    """Write the random log untiered and tiered, then per round append to both, roll, advance the
    clock and compact the untiered copy with the local cleaner and the tiered one with
    ``compact_tiered``: both reports make the same passes to the same checkpoint and both
    copies hold the same records after every round. Sets ``$LOGPLAT_REMOTE_STORAGE`` to a
    fresh prefix under ``remote_url`` (the caller's ``remote_env`` restores it)."""
    os.environ[ENV_REMOTE_STORAGE] = f"{remote_url}-{uuid.uuid4().hex[:8]}"  # a fresh prefix per example
    configs = {"segment_bytes": segment_bytes, "delete_retention_ms": retention, "compaction_strategy": strategy,
               "compaction_strategy_header": VERSION_HEADER if strategy == "header" else ""}
    segments = _raw_segments(batches, per_segment)
    with raw_log(tmp_path / "plain", segments, **configs) as plain, \
            raw_log(tmp_path / "tiered", segments, remote_storage_enable="true", **configs) as tiered:
        logs = (plain.get_log("t", 0), tiered.get_log("t", 0))
        rp = remote_partition("t", 0, logs[1].config)
        now = NOW
        for n, (appends, advance) in enumerate(rounds):
            for recs, kind in appends:
                for log in logs:
                    log.append([ProducerRecord(k.encode(), None if v is None else v.encode(), now + dt, _headers(ver))
                                for k, v, dt, ver in recs], now=now, compression=kind)
            for log in logs:
                log.roll()
            now += advance
            reports = [local_compactor(plain, now), compact_tiered(tiered, now)]
            assert reports[1].status in ("compacted", "skipped"), reports[1].reason
            assert (reports[0].passes, reports[0].new_checkpoint) == (reports[1].passes, reports[1].new_checkpoint)
            assert tiered_records(logs[1], rp, tmp_path / f"read-{n}") == local_records(logs[0], 0), n
