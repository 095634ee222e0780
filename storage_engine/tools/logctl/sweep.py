"""``logctl sweep``: delete the remote objects no retained version names, after
``file.delete.delay.ms``, and orphans past the floor (``remote/sweeper.py``)."""

from __future__ import annotations

import argparse
from collections import Counter

from ...config.values import LONG_MAX
from ...logdir.manager import LogManager
from ...outcomes import FAILED
from ...remote.access import remote_partition
from ...remote.partition import ORPHAN_MIN_AGE_MS, wall_clock_ms
from ...remote.sweeper import SweepResult, sweep_partition
from ..usage import bounded_int
from .arguments import add_json
from .command import Command, LogDirs
from .output import emit, exit_status, pass_over_unreadable


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="this tiered topic's partitions only (default: every tiered topic's)")
    parser.add_argument("--orphan-min-age-ms", type=bounded_int("an age in ms", 0, LONG_MAX),
                        default=ORPHAN_MIN_AGE_MS,
                        help=f"delete objects no version names only when older than this (default {ORPHAN_MIN_AGE_MS})")
    parser.add_argument("--dry-run", action="store_true", help="print what would be deleted, delete nothing")
    add_json(parser)


def _line(r: SweepResult) -> str:
    tp = f"{r.topic}-{r.partition}"
    if r.status == FAILED and not r.deleted:
        return f"{tp}: failed: {r.reason}"
    reasons = Counter(d.reason for d in r.deleted)
    verb = "would delete" if r.dry_run else "deleted"
    did = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items())) or "nothing"
    kept = ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in r.kept.items())
    return f"{tp}: {verb} {len(r.deleted)} object(s) ({did}); kept: {kept}" + (f"; {r.reason}" if r.reason else "")


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    topics = [args.topic] if args.topic is not None else manager.topics()
    pass_over_unreadable(args, manager, args.topic)
    now = wall_clock_ms()
    results = []
    for topic in topics:
        partitions = manager.partitions(topic)
        config = manager.topic_config(topic)
        if not config.remote_storage_enable and args.topic is None:
            continue
        for p in partitions:
            rp = remote_partition(topic, p, config)  # a named topic that is not tiered: refused here
            results.append(sweep_partition(rp, config, now_ms_wall=now, orphan_min_age_ms=args.orphan_min_age_ms,
                                           dry_run=args.dry_run))
    emit(args, {"dry_run": args.dry_run, "partitions": [r.to_dict() for r in results]},
         "\n".join(_line(r) for r in results) or "no tiered partitions")
    return exit_status(args, ((f"{r.topic}-{r.partition}", r.reason or "") for r in results if r.status == FAILED))


COMMAND = Command(name="sweep", help="delete remote objects no retained version names (delayed, swept)",
                  arguments=_arguments, run=_run, log_dirs=LogDirs.READ_ONLY)
