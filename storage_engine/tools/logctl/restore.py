"""``logctl restore``: commit an older remote version's content as a new version
(``remote/restore.py``), as Delta Lake's ``RESTORE TABLE ... TO VERSION AS OF`` does."""

from __future__ import annotations

import argparse

from ...config.topic import LogConfig
from ...errors import UnknownTopicOrPartitionError
from ...logdir.locations import locate
from ...logdir.manager import LogManager
from ...remote.access import remote_partition
from ...remote.restore import restore
from .arguments import PARTITION, VERSION, add_json
from .command import Command
from .output import emit


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", help="a topic with remote.storage.enable=true")
    parser.add_argument("--partition", type=PARTITION, required=True, help="the partition to restore")
    parser.add_argument("--version", type=VERSION, required=True, help="the version whose content becomes the latest")
    add_json(parser)


def checked_partition(manager: LogManager, topic: str, partition: int) -> LogConfig:
    """``topic``'s config, if ``partition`` is one of its partitions."""
    known = manager.partitions(topic)
    if partition not in known:
        raise UnknownTopicOrPartitionError(f"Partition {partition} of topic {topic} does not exist "
                                           f"(partitions: {known})")
    return manager.topic_config(topic)


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    config = checked_partition(manager, args.topic, args.partition)
    loc = locate(manager.log_dirs, args.topic, args.partition)
    rp = remote_partition(args.topic, args.partition, config, directory=loc.path if loc is not None else None)
    result = restore(rp, config, args.version, partition_dir=loc.path if loc is not None else None)
    tail = (f"; the newer tail from offset {result.appended_segments[0]} kept"
            if result.appended_segments else "")
    emit(args, result.to_dict(),
         f"{rp.tp}: version {result.restored_version} restored as version {result.version} "
         f"(log start offset {result.log_start_offset}, tier end {result.end_offset}{tail})"
         + "".join(f"\n  warning: {w}" for w in result.warnings))
    return 0


COMMAND = Command(name="restore", help="commit an older remote version's content as a new version",
                  arguments=_arguments, run=_run)
