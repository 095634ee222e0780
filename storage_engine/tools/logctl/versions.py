"""``logctl versions``: a tiered partition's remote versions, what each did, and whether it can
still be read and restored (``remote/history.py``)."""

from __future__ import annotations

import argparse

from ...logdir.locations import locate
from ...logdir.manager import LogManager
from ...remote.access import remote_partition
from ...remote.history import VersionRow, read_history, version_rows
from ...remote.partition import wall_clock_ms
from .arguments import PARTITION, add_json
from .command import Command, LogDirs
from .output import emit
from .restore import checked_partition


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", help="a topic with remote.storage.enable=true")
    parser.add_argument("--partition", type=PARTITION, required=True, help="the partition whose versions are listed")
    add_json(parser)


def _state(row: VersionRow) -> str:
    if not row.readable:
        return "objects gone"
    return "pinned" if row.pinned else ("latest" if row.superseded_ms is None else
                                       "retained" if row.retained else "expired")


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    config = checked_partition(manager, args.topic, args.partition)
    loc = locate(manager.log_dirs, args.topic, args.partition)
    rp = remote_partition(args.topic, args.partition, config, directory=loc.path if loc is not None else None)
    rows = version_rows(read_history(rp), now_ms_wall=wall_clock_ms(),
                        retention_ms=config.logplat_remote_version_retention_ms)
    lines = [f"{'version':>8} {'committed_ms':>14} {'operation':<14} {'segments':>8} {'bytes':>12} "
             f"{'log_start':>10} {'end':>10} {'checkpoint':>10}  state"]
    lines.extend(f"{r.version:>8} {r.committed_ms:>14} {r.operation:<14} {r.segments:>8} {r.size_bytes:>12} "
                 f"{r.log_start_offset:>10} {r.end_offset:>10} "
                 f"{'-' if r.cleaner_checkpoint is None else r.cleaner_checkpoint:>10}  {_state(r)}" for r in rows)
    emit(args, {"topic": args.topic, "partition": args.partition, "versions": [r.to_dict() for r in rows],
                "requests": rp.store.counters()},
         "\n".join(lines) if rows else f"{rp.tp}: no remote versions")
    return 0


COMMAND = Command(name="versions", help="list a tiered partition's remote versions", arguments=_arguments,
                  run=_run, log_dirs=LogDirs.READ_ONLY)
