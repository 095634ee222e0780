"""``logctl erasure-report``: prove ``max.compaction.lag.ms`` held — the superseded records still
on disk past it, each partition's cleaning deadline, and where a key still is; exit 1 when any
is overdue or a partition could not be read (a partition not read is not proven)."""

from __future__ import annotations

import argparse

from ...cleaner import LogCleaner
from ...cleaner.erasure import UNBOUNDED, partition_erasure_report, require_compaction_bound
from ...log.segment import now_ms
from ...logdir.manager import LogManager
from ..usage import UsageError
from .arguments import PARTITION, add_clock, add_encoding, add_json, decoder
from .command import Command, LogDirs
from .output import emit, not_given, pass_over_unreadable


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="report this topic only (it must be compacted; default: every compacted one)")
    parser.add_argument("--partition", type=PARTITION, help="report this partition only (needs --topic)")
    parser.add_argument("--key", help="also list every offset still holding a record of this key")
    add_encoding(parser, "how --key is written")
    add_clock(parser, "the clock the bound is judged by (default: wall clock)")
    add_json(parser)


def _erasure_partitions(args: argparse.Namespace, manager: LogManager) -> list[tuple[str, int]]:
    """The partitions ``erasure-report`` reads, refused before any is read: every compacted
    topic's, or the named topic's (which must be compacted), or the one ``--partition``."""
    if args.partition is not None and args.topic is None:
        raise UsageError("--partition needs --topic")
    cleaner = LogCleaner(manager)
    if args.topic is None:
        return cleaner.compacted_partitions()
    partitions = manager.partitions(args.topic)  # an unknown topic is an error, as for verify
    require_compaction_bound(args.topic, manager.topic_config(args.topic))
    return cleaner.compacted_partitions([(args.topic, p) for p in
                                         (partitions if args.partition is None else [args.partition])])


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    key = decoder(args.encoding)(args.key, "--key") if args.key is not None else None
    wanted = _erasure_partitions(args, manager)
    now = args.now_ms if args.now_ms is not None else now_ms()
    missing = {tp: why for tp, why in manager.placement.partitions_not_given(args.topic).items()
               if manager.topic_config(tp[0]).compact and (args.partition is None or tp[1] == args.partition)}
    pass_over_unreadable(args, manager, args.topic)
    reports = [partition_erasure_report(manager, t, p, now, key) for t, p in wanted if (t, p) not in missing]
    lines = []
    for r in reports:
        tp = f"{r.topic}-{r.partition}"
        if r.unproven is not None:
            lines.append(f"{tp}: UNPROVEN: {r.unproven}")
        elif r.max_compaction_lag_ms == UNBOUNDED:
            lines.append(f"{tp}: max.compaction.lag.ms is unlimited: no bound to prove ({r.records_read} records read)")
        elif r.ok:
            lines.append(f"{tp}: OK: every record superseded at least max.compaction.lag.ms "
                         f"({r.max_compaction_lag_ms} ms) ago is gone ({r.records_read} records read)")
        else:
            o = r.oldest
            assert o is not None  # not ok: a remnant was counted, and the oldest kept
            lines.append(f"{tp}: NOT ERASED: {r.remnants} record(s) superseded more than max.compaction.lag.ms "
                         f"({r.max_compaction_lag_ms} ms) ago are still on disk; the oldest at offset {o.offset}, "
                         f"superseded by offset {o.superseded_by} at {o.superseded_at_ms}, overdue by {o.overdue_ms} ms")
            if r.held_by is not None:
                lines.append(f"  why: {r.held_by}")
        if r.deadline is not None:
            d = r.deadline
            state = f"{d.time_left_ms} ms left" if d.time_left_ms >= 0 else f"missed by {-d.time_left_ms} ms"
            where = " in the active segment" if d.in_active_segment else ""
            lines.append(f"  deadline: the oldest uncleaned record, offset {d.oldest_offset}{where} (written at "
                         f"{d.oldest_timestamp_ms}), must be cleaned by {d.deadline_ms}: {state}")
        if r.key is not None:
            k = r.key
            lines.append(f"  key {args.key!r}: values at {list(k.values) or 'no offset'}, tombstones at "
                         f"{list(k.tombstones) or 'no offset'}, in .deleted files at {list(k.in_deleted_files) or 'no offset'}")
    left = not_given(missing, [], lines)
    ok = all(r.ok for r in reports) and not left and not args.errors  # a partition not read is not proven
    emit(args, {"ok": ok, "now_ms": now, "partitions": [r.to_dict() for r in reports], "not_given": left},
         "\n".join(lines) or "no compacted partitions")
    return 0 if ok else 1


COMMAND = Command(
    name="erasure-report",
    help="prove max.compaction.lag.ms held: superseded records still on disk, "
         "and where a key still is; exit 1 when any is overdue or a partition is unreadable",
    arguments=_arguments,
    run=_run,
    log_dirs=LogDirs.READ_ONLY,
)
