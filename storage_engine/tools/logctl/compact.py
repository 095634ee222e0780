"""``logctl compact``: compact the due partitions of compacted topics (Kafka's ``LogCleaner``),
or one named partition whatever its dirty ratio, here or as a Spark job; ``--dry-run`` prints
each partition's dirty section and ratio."""

from __future__ import annotations

import argparse

from ...cleaner import LogCleaner
from ...log.segment import now_ms
from ...logdir.manager import LogManager
from ...remote.access import open_store
from ..usage import UsageError
from .arguments import COUNT, PARTITION, add_clock, add_json
from .command import Command, writable_unless_dry_run
from .engines import add_engine_option, chosen_engine
from .output import emit, exit_status, not_given, pass_over_unreadable


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="this topic's partitions only (default: every compacted topic's)")
    parser.add_argument("--partition", type=PARTITION,
                        help="compact this partition (needs --topic) whatever its dirty ratio")
    add_clock(parser, "the cleaner's clock (default: wall clock)")
    add_engine_option(parser)
    parser.add_argument("--max-passes", type=COUNT, default=None, help="stop after this many passes per partition")
    parser.add_argument("--dry-run", action="store_true",
                        help="print each partition's dirty section and ratio, change nothing")
    add_json(parser)


def compaction_choice(manager: LogManager, topic: str | None,
                      partition: int | None) -> tuple[list[tuple[str, int]] | None, bool]:
    """What ``logctl compact`` cleans, whatever the engine, and whether it is forced: a named
    partition whatever its dirty ratio (Kafka has no such command; a user naming one wants it
    cleaned), else the due partitions of the topic (none when it is not compacted), else those
    of every compacted topic (None)."""
    if partition is not None:
        assert topic is not None, "--partition needs --topic, refused before"
        return [(topic, partition)], True
    if topic is None:
        return None, False
    return ([(topic, p) for p in manager.partitions(topic)] if manager.topic_config(topic).compact else []), False


def check_compact(args: argparse.Namespace, manager: LogManager) -> None:
    """What ``compact`` is refused for before it changes anything (its precheck)."""
    if args.partition is not None and args.topic is None:
        raise UsageError("--partition needs --topic")
    if args.topic is not None:
        manager.partitions(args.topic)  # an unknown topic is an error, as for verify
    if args.max_passes is not None and args.max_passes < 1:
        raise UsageError(f"--max-passes must be at least 1, got {args.max_passes}")
    if args.partition is not None:  # a named partition must be there and compacted, dry run or not
        LogCleaner(manager).compacted_partitions([(args.topic, args.partition)])
    if not args.dry_run and any(c.compact and c.remote_storage_enable for c in manager.topic_configs(
            None if args.topic is None else [args.topic]).values()):
        open_store()  # a tiered topic is cleaned in its bucket: unset or unreachable, nothing is cleaned


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    engine = chosen_engine(args)
    check_compact(args, manager)
    now = args.now_ms if args.now_ms is not None else now_ms()
    partitions, force = compaction_choice(manager, args.topic, args.partition)
    pass_over_unreadable(args, manager, args.topic)
    if args.partition is not None:
        if (error := manager.placement.partitions_not_given(args.topic).get((args.topic, args.partition))) is not None:
            raise error
        missing = {}
    else:  # before the work, which cannot change it
        missing = {tp: why for tp, why in manager.placement.partitions_not_given(args.topic).items()
                   if manager.topic_config(tp[0]).compact}
    if args.dry_run:
        candidates = LogCleaner(manager).candidates(args.topic, now_ms=now)
        if args.partition is not None:
            candidates = [c for c in candidates if c.partition == args.partition]
        # Kafka's first uncleanable offset is a segment's base, which can be below a log start
        # offset inside the active segment: the section is then empty, shown as [start, start)
        lines = [f"{c.topic}-{c.partition}: {'due' if c.due else 'not due'}: {c.why}; dirty section "
                 f"[{c.first_dirty_offset}, {max(c.first_dirty_offset, c.first_uncleanable_offset)}), "
                 f"{c.cleanable_bytes} of {c.total_bytes} bytes"
                 for c in candidates]
        left = not_given(missing, [], lines)
        emit(args, {"now_ms": now, "engine": args.engine, "dry_run": True,
                    "partitions": [c.to_dict() for c in candidates], "not_given": left},
             "\n".join(lines) or "no compacted partitions")
        return 0
    if engine is not None:
        if args.max_passes is not None:
            raise UsageError(f"--max-passes applies to --engine local only (--engine {args.engine} cleans in one pass)")
        reports = engine.compact(manager, partitions, force=force, now_ms=now)
    elif force:
        assert partitions is not None, "a forced compaction names its partition"
        cleaner = LogCleaner(manager)
        reports = [cleaner.compact(t, p, now_ms=now, force=True, max_passes=args.max_passes) for t, p in partitions]
    else:  # the due ones among ``partitions``: those of the topic, or of every compacted topic
        reports = LogCleaner(manager).compact_due(args.topic, now_ms=now, max_passes=args.max_passes)
    lines = [r.summary() for r in reports]
    left = not_given(missing, [{"topic": r.topic, "partition": r.partition} for r in reports], lines)
    emit(args, {"now_ms": now, "engine": args.engine, "dry_run": False, "partitions": [r.to_dict() for r in reports],
                "not_given": left}, "\n".join(lines) or "no partition is due for compaction")
    return exit_status(args, ((f"{r.topic}-{r.partition}", r.failed) for r in reports if r.failed is not None))


COMMAND = Command(
    name="compact",
    help="compact due partitions of compacted topics (Kafka's log cleaner)",
    arguments=_arguments,
    run=_run,
    log_dirs=writable_unless_dry_run,
    precheck=check_compact,
)
