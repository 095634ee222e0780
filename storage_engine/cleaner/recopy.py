"""Recopying one group of segments into a staged replacement segment (Kafka's
``Cleaner.cleanSegments``), shared by the local cleaner and the Spark tasks."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.topic import LogConfig
from ..errors import WRITE_REFUSED, CompactionWriteError, write_failure
from ..files.naming import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file,
)
from ..log.segment import LogSegment
from .batch_filter import BatchFilter
from .inputs import MIN_READ_CHUNK, InputSegment, LogSnapshot
from .plan import LogToClean, log_to_clean
from .staging import STAGING_SUFFIX

if TYPE_CHECKING:  # log.py does not import the cleaner; the manager imports both
    from ..log.log import Log


def recopy_group(
    directory: Path,
    config: LogConfig,
    group: list[InputSegment],
    legacy_delete_horizon_ms: int,
    bfilter: BatchFilter,
    *,
    tp: str,
    throttle: Callable[[int], None] = lambda n: None,
    chunk_limit: int = MIN_READ_CHUNK,
) -> LogSegment:
    """Filter a group of segments into one replacement segment in ``directory`` with the first
    input's base offset and the last input's mtime, flushed, under the staging suffix (see
    ``Cleaner._swap``). Its ``.txnindex`` holds the aborted transactions whose ABORT marker the
    filter kept because it dropped batches of theirs in this pass (Kafka's
    ``CleanedTransactionMetadata`` re-appends those to the cleaned segment's index; a marker
    kept only for its delete horizon gets no entry, as in Kafka). Deletes its output if anything fails; a write refused for want of room
    (``WRITE_REFUSED``) is a :class:`CompactionWriteError` naming partition ``tp`` and the file,
    as produce names them."""
    base = group[0].base_offset
    for sfx in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        segment_file(directory, base, sfx + STAGING_SUFFIX).unlink(missing_ok=True)
    cleaned = LogSegment(directory, base, config, file_suffix=STAGING_SUFFIX, create=True)
    retained_before = len(bfilter.tracker.retained_aborted)
    try:
        for seg in group:
            bfilter.path = str(seg.path)  # what an error about one of its batches names
            retain_legacy = seg.mtime_ms > legacy_delete_horizon_ms
            out: list[bytes | memoryview] = []
            out_bytes = 0
            largest = -1
            max_ts, offset_of_max = -1, -1
            for raw, chunk, chunk_offset in seg.batches_skipping(bfilter.decided_by_header):
                throttle(raw.header.size_in_bytes)
                kept = bfilter.filter(raw, retain_legacy_deletes=retain_legacy, chunk=chunk,
                                      chunk_offset=chunk_offset)
                if kept is None:
                    continue
                out.append(kept.data)
                out_bytes += len(kept.data)
                largest = kept.last_offset
                if kept.max_timestamp > max_ts:
                    max_ts, offset_of_max = kept.max_timestamp, kept.last_offset
                if out_bytes >= chunk_limit:
                    cleaned.append(largest, max_ts, offset_of_max, b"".join(out))
                    throttle(out_bytes)
                    out, out_bytes, max_ts, offset_of_max = [], 0, -1, -1
            if out:
                cleaned.append(largest, max_ts, offset_of_max, b"".join(out))
                throttle(out_bytes)
        for txn in bfilter.tracker.retained_aborted[retained_before:]:
            cleaned.txn_index.append(txn)
        cleaned.on_become_inactive()
        cleaned.flush()
        cleaned.set_last_modified(group[-1].mtime_ms)
    except BaseException as exc:
        cleaned.close(trim_indexes=False)
        cleaned.delete_files()
        if isinstance(exc, OSError) and exc.errno in WRITE_REFUSED:
            raise CompactionWriteError(f"{write_failure(tp, exc, cleaned.log_path)}; the cleaner's output was "
                                       "removed and nothing was swapped") from None
        raise
    return cleaned


def discard_staged(cleaned: Iterable[LogSegment]) -> None:
    """Delete replacement segments that never reached their swap."""
    for seg in cleaned:
        if seg.file_suffix in (STAGING_SUFFIX, CLEANED_SUFFIX):
            seg.close(trim_indexes=False)
            seg.delete_files()


def range_of(log: Log, snap: LogSnapshot, last_stable_offset: int | None, now_ms: int) -> LogToClean:
    """The partition's cleanable range and dirtiness as a snapshot of it shows them."""
    return log_to_clean(log.topic, log.partition, snap.facts, checkpoint=snap.checkpoint,
                        log_start_offset=snap.log_start_offset, log_end_offset=snap.log_end_offset,
                        last_stable_offset=last_stable_offset, now_ms=now_ms, config=log.config)
