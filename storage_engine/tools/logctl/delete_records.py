"""``logctl delete-records``: advance a partition's log start offset (Kafka's
``DeleteRecordsCommand``)."""

from __future__ import annotations

import argparse

from ...errors import NeedsRecoveryError
from ...files.naming import check_not_metadata_log
from ...logdir.manager import LogManager
from .arguments import OFFSET, PARTITION, add_json
from .command import Command
from .output import emit


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", help="the topic whose records are deleted")
    parser.add_argument("--partition", type=PARTITION, required=True, help="the partition whose records are deleted")
    parser.add_argument("--before-offset", type=OFFSET, required=True,
                        help="the new log start offset: every record below it goes")
    add_json(parser)


def check_delete_records(args: argparse.Namespace, manager: LogManager) -> None:
    """What ``delete-records`` is refused for before it changes anything (its precheck). A
    partition the view cannot show before its repair (an interrupted swap) is left to the
    command, whose writable open repairs it and then checks the same."""
    check_not_metadata_log(args.topic, "delete-records")
    try:
        log = manager.get_log(args.topic, args.partition)
    except NeedsRecoveryError:
        return
    log.check_delete_records(args.before_offset)


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    log = manager.get_log(args.topic, args.partition)
    lso = log.delete_records(args.before_offset)
    emit(args, {"topic": args.topic, "partition": args.partition, "low_watermark": lso},
         f"partition: {log.tp}\tlow_watermark: {lso}")
    return 0


COMMAND = Command(name="delete-records", help="advance a partition's log start offset", arguments=_arguments,
                  run=_run, precheck=check_delete_records)
