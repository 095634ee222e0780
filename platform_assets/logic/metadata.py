"""The metadata each event carries, as Dagster plots it.

The UI plots ``int`` and ``float`` metadata over time (for a dynamically partitioned asset, the
partitions' points on one time axis); text, JSON and missing values are never plotted. So every
figure here is a plain number under a stable name, in a unit its name says (``size_mb``,
``duration_s``), each partition's own (never a constant of the run),
and a value that does not apply (the cleaner checkpoint of a ``delete`` topic, the dirty ratio of a
log that has never been measured) is left out rather than sent as ``None`` or ``-1``, which
would draw a misleading point. Explanations go into text entries beside the numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dagster as dg

from .log_state import PartitionState
from .units import megabytes

if TYPE_CHECKING:
    from .partition_cleanup import PartitionCleanup


def _some(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def effective_checkpoint(state: PartitionState) -> int:
    """The cleaner checkpoint, or the log start offset for a log never cleaned: Kafka reads a
    missing checkpoint entry that way (the whole log is dirty), and the plot stays continuous."""
    return state.log_start_offset if state.cleaner_checkpoint is None else state.cleaner_checkpoint


def state_metadata(state: PartitionState, *, log_end_offset: int | None = None, suffix: str = "") -> dict[str, Any]:
    """A partition's cheap state: what an observation records, and a materialization's before/after."""
    leo = state.log_end_offset if log_end_offset is None else log_end_offset
    ratio = state.dirty_ratio
    return _some({
        f"size_mb{suffix}": megabytes(state.size_bytes),
        f"segments{suffix}": state.segments,
        f"log_start_offset{suffix}": state.log_start_offset,
        f"log_end_offset{suffix}": leo,
        f"cleaner_checkpoint{suffix}": effective_checkpoint(state) if state.compact else None,
        f"dirty_ratio{suffix}": None if ratio is None else round(ratio, 6),
    })


def location_metadata(state: PartitionState) -> dict[str, Any]:
    """Where the partition lives: its directory, as a path the UI shows (and can copy)."""
    return {"log_dir": dg.MetadataValue.path(state.directory)} if state.directory else {}


def deadline_metadata(state: PartitionState) -> dict[str, Any]:
    """The erasure deadline (``max.compaction.lag.ms``) of a compacted partition with dirty
    records: the oldest uncleaned one's offset and the seconds left (negative once missed)."""
    deadline = state.candidacy.deadline if state.candidacy is not None else None
    if deadline is None:
        return {}
    return {"oldest_uncleaned_offset": deadline.oldest_offset,
            "erasure_time_left_s": round(deadline.time_left_ms / 1000, 3)}


def observation_metadata(state: PartitionState) -> dict[str, Any]:
    """What the state sensor records when a partition's state changed."""
    values = {**state_metadata(state), **location_metadata(state)}
    values.update({
        "compaction_due": state.compaction_due,
        "deletable_segments": state.deletable_segments,
        "deletable_mb": megabytes(state.deletable_bytes),
    })
    if state.candidacy is not None:
        values["why"] = state.candidacy.why
        values.update(deadline_metadata(state))
    if state.retention is not None and state.retention.warnings:
        values["retention_warnings"] = dg.MetadataValue.md("\n".join(f"* {w}" for w in state.retention.warnings))
    return values


def cleanup_metadata(result: PartitionCleanup) -> dict[str, Any]:
    """One partition's materialization: the state after (under the plain names, so the plots
    show the log as it is), the state before (``*_before``), and what the cleaning did."""
    values = state_metadata(result.after, log_end_offset=result.leo_after)
    values.update(state_metadata(result.before, log_end_offset=result.leo_before, suffix="_before"))
    values.update(location_metadata(result.after))
    values.update(_some({
        "status": result.status,
        "reason": result.reason,
        "mb_reclaimed": megabytes(result.bytes_reclaimed),
        "records_removed": result.records_removed,
        "duplicates_removed": result.counter("duplicates_removed"),
        "tombstones_removed": result.counter("tombstones_removed"),
        "records_without_version": result.counter("records_without_version") or None,
        "segments_deleted": result.segments_deleted,
        "retention_rules": result.retention_rules,
        "duration_s": round(result.duration_s, 6),
        "throughput_mb_per_s": result.report_value("mb_per_s"),
        "throughput_records_per_s": result.report_value("records_per_s"),
        "log_state_version": result.data_version,
    }))
    return values
