"""``logctl verify``: check CRCs, offsets and indexes of every partition (a tiered one's remote
tier too: ``tools.verify.verify_remote_tier``), and name what no
command reads (misnamed, stray and orphaned partition directories); exit 1 on any problem. The
log dirs are opened read-only, so damage is reported exactly as it was found."""

from __future__ import annotations

import argparse

from ...errors import UnknownTopicOrPartitionError
from ...files.naming import MAX_PARTITION
from ...logdir.locations import misnamed_partition_dirs
from ...logdir.manager import LogManager
from ..verify import verify_partition
from .arguments import add_json
from .command import Command, LogDirs
from .output import emit, pass_over_unreadable


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="verify this topic only (default: every topic)")
    add_json(parser)


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    with manager.metadata.read_lock():  # a create, alter or delete in flight is not damage
        pass_over_unreadable(args, manager, args.topic)
        listed = {t: _listed_partitions(manager, t, named=args.topic is not None)
                  for t in ([args.topic] if args.topic is not None else manager.topics())}
        misnamed = misnamed_partition_dirs(manager.log_dirs) if args.topic is None else []
        orphans = manager.metadata.orphans() if args.topic is None else {}
        strays = [(path, count) for path, count in manager.stray_partition_dirs(args.topic)
                  if count or path.name.rpartition("-")[0] not in orphans]  # an orphan's are named with it
    reports = [r for t, partitions in listed.items() for p in partitions  # a named topic is reported whatever
               if (r := verify_partition(manager, t, p)).log_end_offset is not None or args.topic is not None
               or p in _listed_partitions(manager, t, named=False)]  # not when deleted since the listing
    ok = all(r.ok for r in reports) and not misnamed and not strays and not orphans and not args.errors
    data = [
        {"topic": r.topic, "partition": r.partition, "ok": r.ok, "batches": r.batches, "records": r.records,
         "log_start_offset": r.log_start_offset, "log_end_offset": r.log_end_offset, "segments": len(r.segments),
         "remote_version": r.remote_version, "problems": r.problems}
        for r in reports
    ]
    lines = []
    for r in reports:
        status = "OK" if r.ok else f"{len(r.problems)} problem(s)"
        if r.log_end_offset is None:
            lines.append(f"{r.topic}-{r.partition}: {status}: not readable as it is")
        else:
            tier = f" (remote version {r.remote_version})" if r.remote_version is not None else ""
            lines.append(f"{r.topic}-{r.partition}: {status}: {len(r.segments)} segments{tier}, {r.batches} batches, "
                         f"{r.records} records, offsets {r.log_start_offset}..{r.log_end_offset}")
        lines.extend(f"  {p}" for p in r.problems)
    lines.extend(f"{path}: holds segment files, but its name is no partition directory's (<topic>-<partition>, "
                 f"the partition without leading zeros and at most {MAX_PARTITION}): no command reads it; rename it"
                 for path in misnamed)
    lines.extend(f"{path}: named like a partition beyond its topic's {count} partition(s) (the topic's metadata): "
                 "a stray, which no command reads (a KRaft broker deletes such a log); remove it or move it out, "
                 "or adopt it with topic alter --partitions"
                 for path, count in strays)
    lines.extend(str(manager.metadata.orphan_error(topic, home)) for topic, home in sorted(orphans.items()))
    emit(args, {"ok": ok, "partitions": data, "misnamed_dirs": [str(p) for p in misnamed],
                "stray_dirs": [str(p) for p, _ in strays], "orphans": sorted(orphans)},
         "\n".join(lines) or "no partitions")
    return 0 if ok else 1


def _listed_partitions(manager: LogManager, topic: str, *, named: bool) -> list[int]:
    """A topic's partitions for ``verify``; none for one of every topic deleted meanwhile."""
    try:
        return manager.partitions(topic)
    except UnknownTopicOrPartitionError:
        if named:
            raise
        return []


COMMAND = Command(name="verify", help="check CRCs, offsets and indexes; exit 1 on any problem",
                  arguments=_arguments, run=_run, log_dirs=LogDirs.READ_ONLY)
