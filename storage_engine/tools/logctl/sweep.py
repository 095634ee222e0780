"""``logctl sweep``: delete the remote objects no retained version names, after
``file.delete.delay.ms``, and orphans past the floor (``remote.tier_runs.sweep_tiered``)."""

from __future__ import annotations

import argparse

from ...config.values import LONG_MAX
from ...logdir.manager import LogManager
from ...outcomes import FAILED
from ...remote.partition import ORPHAN_MIN_AGE_MS, wall_clock_ms
from ...remote.tier_runs import sweep_tiered
from ..usage import bounded_int
from .arguments import add_json
from .command import Command, LogDirs
from .output import emit, exit_status, pass_over_unreadable


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="this tiered topic's partitions only (default: every tiered topic's)")
    parser.add_argument("--orphan-min-age-ms", type=bounded_int("an age in ms", ORPHAN_MIN_AGE_MS, LONG_MAX),
                        default=ORPHAN_MIN_AGE_MS,
                        help="delete objects no version names only when older than this (default and least "
                        f"{ORPHAN_MIN_AGE_MS}: twice the age of the oldest uploads a writer still commits)")
    parser.add_argument("--dry-run", action="store_true", help="print what would be deleted, delete nothing")
    add_json(parser)


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    pass_over_unreadable(args, manager, args.topic)
    results = sweep_tiered(manager, args.topic, now_ms_wall=wall_clock_ms(), orphan_min_age_ms=args.orphan_min_age_ms,
                           dry_run=args.dry_run)
    emit(args, {"dry_run": args.dry_run, "partitions": [r.to_dict() for r in results]},
         "\n".join(r.summary() for r in results) or "no tiered partitions")
    return exit_status(args, ((f"{r.topic}-{r.partition}", r.reason or "") for r in results if r.status == FAILED))


COMMAND = Command(name="sweep", help="delete remote objects no retained version names (delayed, swept)",
                  arguments=_arguments, run=_run, log_dirs=LogDirs.READ_ONLY)
