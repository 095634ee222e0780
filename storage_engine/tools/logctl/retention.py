"""``logctl retention``: delete segments past ``retention.ms``, ``retention.bytes`` or the log
start offset (Kafka's ``UnifiedLog.deleteOldSegments``), here or as a Spark job. A tiered
topic's partitions get two rows, the remote tier's retention and then the local copies' release
(``remote.tier_runs.retain_tiered``), each with its ``tier``."""

from __future__ import annotations

import argparse

from ...log.segment import now_ms
from ...logdir.manager import LogManager
from ...outcomes import CHANGED, FAILED, NOTHING
from ...remote.access import open_store
from ...remote.tier_runs import has_tiered_topic, retain_tiered
from .arguments import add_clock, add_json
from .command import Command, writable_unless_dry_run
from .engines import add_engine_option, chosen_engine
from .output import emit, exit_status, not_given, pass_over_unreadable

#: why a topic with the empty cleanup.policy never has anything to delete
KEPT_FOREVER = "cleanup.policy is empty: its records are kept forever (KIP-1161)"


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="this topic's partitions only (default: every topic's)")
    add_clock(parser, "the clock retention judges by (default: wall clock)")
    parser.add_argument("--dry-run", action="store_true", help="print the plans, change nothing")
    add_engine_option(parser)
    add_json(parser)


def check_retention(args: argparse.Namespace, manager: LogManager) -> None:
    """What ``retention`` is refused for before it changes anything (its precheck): an unknown
    topic named, and, when a tiered topic is among the partitions, a remote storage that is not
    set or does not answer."""
    if args.topic is not None:
        manager.partitions(args.topic)  # an unknown topic is an error, as for verify
    if has_tiered_topic(manager, args.topic):
        open_store()


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    if args.topic is not None:
        manager.partitions(args.topic)  # an unknown topic is an error, as for verify
    now = args.now_ms if args.now_ms is not None else now_ms()
    engine = chosen_engine(args)
    missing = manager.placement.partitions_not_given(args.topic)  # before the work, which cannot change it
    pass_over_unreadable(args, manager, args.topic)
    if engine is not None:
        data = engine.retention(manager, args.topic, now_ms=now, dry_run=args.dry_run)
    else:
        tiered = [{"tier": "local"} | r.to_dict()
                  for r in retain_tiered(manager, args.topic, now_ms=now, dry_run=args.dry_run)]
        plans = manager.retention.plans(args.topic, now_ms=now)
        applied = {} if args.dry_run else {(r.topic, r.partition): r
                                           for r in manager.retention.apply(plans, now_ms=now)}
        data = sorted(tiered + [applied[(p.topic, p.partition)].to_dict() if (p.topic, p.partition) in applied
                                else p.to_dict() | {"applied": False} for p in plans],
                      key=lambda d: (d["topic"], d["partition"]))  # stable: a tiered partition's remote row first
    lines = []
    for d in data:
        segs = d["segments_to_delete"]
        verb = "deleted" if d["applied"] else "would delete"
        where = f"{d['topic']}-{d['partition']}" + (f" ({d['tier']} tier)" if "tier" in d else "")
        if d.get("status") == FAILED and "bytes_to_free" not in d:  # it failed before it had a plan
            lines.append(f"{where}: failed: {d['reason']}")
            continue
        if segs:
            reasons = ", ".join(f"{s['base_offset']} ({s['reason']}, {s['size_bytes']} B)" for s in segs)
            lso = d["log_start_offset_after"] if d["applied"] else d["new_log_start_offset"]  # planned, or done
            if lso is None:  # every segment goes: the active one is rolled first, at the log end offset
                lso = "the log end offset (the active segment is rolled first)"
            lines.append(f"{where}: {verb} {len(segs)} segment(s), {d['bytes_to_free']} bytes: "
                         f"{reasons}; log start offset -> {lso}" + _version(d))
        else:
            why = d["reason"] if d.get("status") == NOTHING and d["reason"] else (KEPT_FOREVER if d.get("kept_forever") else None)
            lines.append(f"{where}: nothing to delete" + (f" ({why})" if why else ""))
        if d.get("status") in (CHANGED, FAILED):
            lines.append(f"  not applied ({d['status']}): {d['reason']}")
        lines.extend(f"  warning: {w}" for w in d["warnings"])
    left = not_given(missing, data, lines)
    emit(args, {"now_ms": now, "engine": args.engine, "dry_run": args.dry_run, "partitions": data,
                "not_given": left}, "\n".join(lines) or "no partitions")
    return exit_status(args, ((f"{d['topic']}-{d['partition']}", d["reason"]) for d in data if d.get("status") == FAILED))


def _version(d: dict) -> str:
    return f" (remote version {d['remote_version']})" if d.get("remote_version") is not None else ""


COMMAND = Command(
    name="retention",
    help="delete segments past retention.ms / retention.bytes / the log start offset",
    arguments=_arguments,
    run=_run,
    log_dirs=writable_unless_dry_run,
    precheck=check_retention,
)
