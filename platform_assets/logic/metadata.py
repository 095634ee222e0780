"""The metadata each event carries, as Dagster plots it.

The UI plots ``int`` and ``float`` metadata over time (for a dynamically partitioned asset, the
partitions' points on one time axis); text, JSON and missing values are never plotted. So every
figure here is a plain number under a stable name, in a unit its name says (``size_mb``,
``duration_s``), each partition's own (never a constant of the run),
and a value that does not apply (the cleaner checkpoint of a ``delete`` topic, the dirty ratio of a
log that has never been measured) is left out rather than sent as ``None`` or ``-1``, which
would draw a misleading point. Explanations go into text entries beside the numbers.

Every event also names its ``topic`` and ``partition`` (text, so never plotted): the run log,
the Events tab and an alert show one event without its asset page around it. Dagster's own
names are used where the catalog reads them: ``dagster/uri`` (the partition's log dir as a
``file://`` URI) and ``dagster/row_count`` (records, only where a run counted them; the
``offset_span`` beside it is an upper bound, see :func:`state_metadata`). ``GLOSSARY`` explains
every name, for the asset descriptions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg

from storage_engine.outcomes import FAILED

from .check_outcomes import OFFSETS_INCREASE, CheckOutcome
from .log_state import PartitionState
from .partition_keys import partition_key
from .record_core import RECORD_CORE
from .units import megabytes

if TYPE_CHECKING:
    from storage_engine.remote.sweeper import SweepResult
    from storage_engine.remote.tiering import TierResult

    from .partition_cleanup import PartitionCleanup

ROW_COUNT = "dagster/row_count"  # Dagster's name: the catalog shows it as the asset's row count
URI = "dagster/uri"  # Dagster's name for where the data lives


def _some(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def effective_checkpoint(state: PartitionState) -> int:
    """The cleaner checkpoint, or the log start offset for a log never cleaned: Kafka reads a
    missing checkpoint entry that way (the whole log is dirty), and the plot stays continuous."""
    return state.log_start_offset if state.cleaner_checkpoint is None else state.cleaner_checkpoint


def identity_metadata(topic: str, partition: int) -> dict[str, Any]:
    """The topic and partition an event is about, as text (a partition number is a name here,
    not a figure to plot)."""
    return {"topic": dg.MetadataValue.text(topic), "partition": dg.MetadataValue.text(partition_key(partition))}


def state_metadata(state: PartitionState, *, log_end_offset: int | None = None, suffix: str = "") -> dict[str, Any]:
    """A partition's cheap state: what an observation records, and a materialization's before/after.

    ``offset_span`` is log end offset minus log start offset: the records in a log never
    compacted (bar transaction markers), an upper bound for a compacted one, whose cleaned
    section has gaps; the records themselves are counted only where a run reads them
    (``dagster/row_count``)."""
    leo = state.log_end_offset if log_end_offset is None else log_end_offset
    ratio = state.dirty_ratio
    return _some({
        f"size_mb{suffix}": megabytes(state.size_bytes),
        f"segments{suffix}": state.segments,
        f"log_start_offset{suffix}": state.log_start_offset,
        f"log_end_offset{suffix}": leo,
        f"offset_span{suffix}": None if leo is None else leo - state.log_start_offset,
        f"cleaner_checkpoint{suffix}": effective_checkpoint(state) if state.compact else None,
        f"dirty_ratio{suffix}": None if ratio is None else round(ratio, 6),
    })


def location_metadata(state: PartitionState) -> dict[str, Any]:
    """Where the partition lives: its directory, as a path the UI shows (and can copy), and as
    Dagster's ``dagster/uri``."""
    if not state.directory:
        return {}
    return {"log_dir": dg.MetadataValue.path(state.directory), URI: Path(state.directory).resolve().as_uri()}


def deadline_metadata(state: PartitionState) -> dict[str, Any]:
    """The erasure deadline (``max.compaction.lag.ms``) of a compacted partition with dirty
    records, as moments (``MetadataValue.timestamp``, which the UI shows in the viewer's time
    zone), never as a countdown, which goes stale the second it is recorded: the oldest
    uncleaned record's offset, when it was written and by when it must be cleaned. For a
    partition the engine's erasure report read (its deadline passed): how many superseded
    records are still on disk past the bound, and the oldest one's offset."""
    deadline = state.candidacy.deadline if state.candidacy is not None else None
    if deadline is None:
        return {}
    values: dict[str, Any] = {
        "oldest_uncleaned_offset": deadline.oldest_offset,
        "oldest_uncleaned_time": dg.MetadataValue.timestamp(deadline.oldest_timestamp_ms / 1000),
        "erasure_deadline": dg.MetadataValue.timestamp(deadline.deadline_ms / 1000),
    }
    proof = state.erasure
    if proof is not None and proof.unproven is None:
        values["superseded_records_on_disk"] = proof.remnants
        if proof.oldest is not None:
            values["oldest_superseded_offset"] = proof.oldest.offset
    return values


def remote_tier_metadata(state: PartitionState) -> dict[str, Any]:
    """A tiered partition's remembered remote tier (``tiering.remembered_tier``) and what tiering
    would do now; nothing for an untiered one. ``size_mb`` and ``segments`` stay the local
    log's; the log start offset and checkpoint are the whole log's (the remote version's)."""
    if state.tiering is None:
        return {}
    need = state.tiering
    return _some({
        "remote_version": state.remote_version,
        "remote_end_offset": need.remote_end,
        "remote_mb": megabytes(state.remote_bytes) if state.remote_version is not None else None,
        "remote_segments": state.remote_segments if state.remote_version is not None else None,
        "tierable_segments": len(need.tierable),
        "local_copies_releasable": len(need.releasable),
    })


def observation_metadata(state: PartitionState) -> dict[str, Any]:
    """What the state sensor records when a partition's state changed."""
    values = {**identity_metadata(state.topic, state.partition), **state_metadata(state), **location_metadata(state),
              **remote_tier_metadata(state)}
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


def records_counted(outcomes: Iterable[CheckOutcome]) -> dict[int, int]:
    """The records a run's checks read in each partition after compacting it (the engine's
    verification reads every one up to the log end offset before the run): an exact count,
    which the run has at no extra cost."""
    return {o.partition: o.metadata["records"] for o in outcomes
            if o.name == OFFSETS_INCREASE and isinstance(o.metadata.get("records"), int)}


def cleanup_metadata(result: PartitionCleanup, records: int | None = None) -> dict[str, Any]:
    """One partition's materialization: the state after (under the plain names, so the plots
    show the log as it is), the state before (``*_before``), and what the cleaning did;
    ``records``: the records the run counted in the partition (``records_counted``), if it did.
    A tiered partition's also carry its remote tier after the run and what each job reported of
    it (``remote_report_metadata``: the version committed, its requests by type)."""
    values = identity_metadata(result.before.topic, result.partition)
    values.update(state_metadata(result.after, log_end_offset=result.leo_after))
    values.update(state_metadata(result.before, log_end_offset=result.leo_before, suffix="_before"))
    values.update(location_metadata(result.after))
    values.update(remote_tier_metadata(result.after))  # a tiered partition's tier after the run
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
        ROW_COUNT: records,
    }))
    for report in result.reports():
        values.update(remote_report_metadata(report))
    return values


_BYTES_MOVED = ("bytes_uploaded", "bytes_downloaded")  # ``ObjectStore.counters()``'s names


def request_metadata(requests: Mapping[str, int]) -> dict[str, Any]:
    """A run's requests to the object store by type (``requests_put`` ...) and the bytes each
    way in MB, from ``ObjectStore.counters()`` (or the difference of two readings)."""
    values: dict[str, Any] = {k: int(v) for k, v in sorted(requests.items()) if k.startswith("requests_")}
    for key in _BYTES_MOVED:
        if key in requests:
            values[key.replace("bytes_", "mb_")] = megabytes(int(requests[key]))
    return values


def remote_report_metadata(report: Mapping[str, Any]) -> dict[str, Any]:
    """What a compaction or retention report of a tiered partition says of the remote tier,
    when it says it (``remote_version``, the version's offsets, its request counters, flat or
    under ``requests``); nothing for a local report."""
    values = _some({k: report.get(k) for k in ("remote_version", "remote_log_start_offset", "remote_end_offset")
                    if isinstance(report.get(k), int)})
    nested = report.get("requests")
    requests = {**(nested if isinstance(nested, Mapping) else {}),
                **{k: v for k, v in report.items() if k.startswith("requests_") or k in _BYTES_MOVED}}
    values.update(request_metadata({k: v for k, v in requests.items() if isinstance(v, int)}))
    return values if values.get("remote_version") is not None else {}


def tier_metadata(state: PartitionState, result: TierResult, requests: Mapping[str, int]) -> dict[str, Any]:
    """One partition's materialization by a tiering run: the log after it (``state``, with its
    remembered tier), what was copied and released, and the run's own requests and bytes."""
    values = {**identity_metadata(state.topic, state.partition), **state_metadata(state), **location_metadata(state),
              **remote_tier_metadata(state)}
    release = result.local_release
    values.update(_some({
        "status": str(result.status),
        "reason": result.reason,
        "remote_version": result.version,
        "remote_log_start_offset": result.remote_log_start_offset,
        "remote_end_offset": result.remote_end_offset,
        "segments_tiered": len(result.uploaded_segments),
        "local_copies_released": len(release.deleted_segments) if release is not None else 0,
        "duration_s": round(result.duration_s, 6),
    }))
    values.update(request_metadata(requests))
    return values


def _counted(prefix: str, names: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        key = f"{prefix}{name.replace('-', '_')}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def sweep_metadata(result: SweepResult) -> dict[str, Any]:
    """What the remote sweep (``storage_engine.remote.sweeper``) did to one partition's objects:
    the objects deleted (or, in a dry run, that would be) by the rule that let each go, what
    stayed by why, and the partition's own requests."""
    values = {**identity_metadata(result.topic, result.partition), **_some({
        "status": str(result.status),
        "reason": result.reason,
        "remote_version": result.remote_version,
        "dry_run": result.dry_run,
        "objects_deleted": len(result.deleted),
        **_counted("deleted_", (d.reason for d in result.deleted)),
        **{f"kept_{why}": n for why, n in sorted(result.kept.items())},
        "duration_s": round(result.duration_s, 6),
    })}
    values.update(request_metadata(result.requests))
    return values


def sweep_run_metadata(results: Sequence[SweepResult]) -> dict[str, Any]:
    """A remote sweep run's totals over its partitions, for the run's own record."""
    deleted = [d for r in results for d in r.deleted]
    requests: dict[str, int] = {}
    for r in results:
        for k, v in r.requests.items():
            requests[k] = requests.get(k, 0) + v
    return {"partitions": len(results), "objects_deleted": len(deleted),
            **_counted("deleted_", (d.reason for d in deleted)),
            "partitions_failed": sum(1 for r in results if r.status == FAILED),
            **request_metadata(requests)}


def deleted_files_metadata(topic: str, partition: int, sizes: Iterable[int]) -> dict[str, Any]:
    """What ``deleted_files_sensor`` records of one partition: the ``.deleted`` files it removed."""
    sizes = list(sizes)
    return {**identity_metadata(topic, partition), "deleted_files_removed": len(sizes),
            "mb_freed": megabytes(sum(sizes))}


#: What each metadata name on a topic's events means, for the asset's description (the UI shows
#: names, not their meaning). ``*_before``: the same figure before the run.
GLOSSARY: dict[str, str] = {
    "topic": "the Kafka topic",
    "partition": "the Kafka partition (the asset partition key)",
    "size_mb": "bytes of the partition's segment files, in MB (10^6 bytes)",
    "segments": "segment files in the log",
    "log_start_offset": "the first offset a consumer can read",
    "log_end_offset": "the offset the next record will get",
    "offset_span": "log end offset - log start offset: the records of a log never compacted, "
                   "an upper bound for a compacted one",
    ROW_COUNT: "records in the log, counted by the run's checks after compacting it",
    "cleaner_checkpoint": "the offset below which the log is cleaned (compacted topics; the log start offset "
                          "if never cleaned)",
    "dirty_ratio": "dirty (uncleaned) bytes / cleanable bytes, compared with min.cleanable.dirty.ratio",
    "min_cleanable_dirty_ratio": "the topic's min.cleanable.dirty.ratio",
    "log_dir": "the partition's directory",
    RECORD_CORE: "the engine's record core the run's Spark workers used: compiled (Rust) or the pure-Python "
                   "reference, and why (LOGPLAT_CORE; `logctl core`)",
    URI: "the partition's directory as a file:// URI",
    "compaction_due": "whether the cleaner would compact the partition now (dirty ratio or erasure deadline)",
    "deletable_segments": "segments retention would delete now",
    "deletable_mb": "bytes of those segments, in MB",
    "why": "why compaction is or is not due, in the engine's words",
    "oldest_uncleaned_offset": "the oldest record not cleaned yet, whose max.compaction.lag.ms is the deadline",
    "erasure_time_left_s": "seconds until that record's deadline (negative once missed)",
    "retention_warnings": "retention settings the engine could not apply as written",
    "status": "what the run did to the partition (compacted, deleted, nothing, failed), or the "
              "log_health verdict (ok, warn, error, unreadable)",
    "reason": "why the run did what it did (or failed)",
    "reasons": "why the log_health verdict is not ok",
    "log_health": "the log_health verdict the state sensor recorded with this observation, and why",
    "mb_reclaimed": "bytes the run freed, in MB",
    "records_removed": "records compaction removed",
    "duplicates_removed": "superseded records of a key compaction removed",
    "tombstones_removed": "tombstones past delete.retention.ms compaction removed",
    "records_without_version": "records the compaction strategy's version header was missing from",
    "segments_deleted": "segments retention deleted",
    "retention_rules": "the rule each retention deletion followed (retention.ms, retention.bytes, log start offset)",
    "duration_s": "the partition's own cleaning time (planning, Spark tasks, commit), in seconds",
    "throughput_mb_per_s": "MB compacted per second of that time",
    "throughput_records_per_s": "records compacted per second of that time",
    "log_state_version": "the data version: a digest of the log's state after the run",
    "now_ms": "the clock the run judged by",
    "deleted_files_removed": ".deleted files removed once file.delete.delay.ms had passed",
    "remote_version": "the latest version of the partition's remote tier (tiered topics): committed by this run, or "
                      "the one the partition remembers",
    "remote_log_start_offset": "the remote version's log start offset (the whole log's)",
    "remote_end_offset": "the offset the remote tier ends at: below it records are read from the object store",
    "remote_mb": "bytes of the remote version's segments, in MB",
    "remote_segments": "segments in the remote version",
    "tierable_segments": "rolled local segments past the remote tier's end (what a tiering run copies)",
    "local_copies_releasable": "local copies of tiered segments past local.retention.* (what a tiering run removes)",
    "segments_tiered": "segments this run copied to the remote tier",
    "local_copies_released": "local copies of tiered segments this run removed (local.retention.*)",
    "requests_put": "PUT requests this run made to the object store (likewise requests_get, requests_list, "
                    "requests_delete, requests_head)",
    "mb_uploaded": "bytes this run sent to the object store, in MB (mb_downloaded: received)",
    "mb_freed": "bytes those files held, in MB",
    "objects_deleted": "objects the remote sweep deleted from the partition's remote tier (dry_run: would delete)",
    "deleted_released": "of those, objects a version released, no retained version names, past file.delete.delay.ms "
                        "(likewise deleted_orphan: named by no version, past the orphan floor; deleted_version: "
                        "version objects no longer retained; deleted_expired_pin: pins whose holder died)",
    "kept_retained": "objects a retained version names (likewise kept_waiting: released, within file.delete.delay.ms; "
                     "kept_young_orphans: named by no version, younger than the floor; kept_unrecognized: not ours)",
}


def glossary_markdown(glossary: Mapping[str, str] = GLOSSARY) -> str:
    """A glossary as a Markdown table, for an asset description."""
    return "\n".join(["| metadata | meaning |", "|---|---|", *(f"| `{n}` | {m} |" for n, m in glossary.items())])

