"""``logctl delete-records``: advance a partition's log start offset (Kafka's
``DeleteRecordsCommand``). On a tiered topic both tiers move, the remote tier first (a
``delete-records`` version), so a kill between them leaves the local log start behind, never
ahead of the log's, and a rerun completes."""

from __future__ import annotations

import argparse

from ...errors import NeedsRecoveryError
from ...files.naming import check_not_metadata_log
from ...logdir.manager import LogManager
from ...remote.access import open_store, remote_partition
from ...remote.retention import delete_records_remote
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
    if log.config.remote_storage_enable:
        open_store()  # unset or unreachable: refused before anything is written


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    log = manager.get_log(args.topic, args.partition)
    data: dict = {"topic": args.topic, "partition": args.partition}
    text = ""
    if log.config.remote_storage_enable:
        log.check_delete_records(args.before_offset)
        remote = delete_records_remote(remote_partition(args.topic, args.partition, log.config, directory=log.dir), log.config,
                                       args.before_offset, partition_dir=log.dir)
        data |= {"remote_version": remote.remote_version, "remote_log_start_offset": remote.remote_log_start_offset,
                 "requests": remote.requests}
        if remote.remote_version is not None:
            text = f"\tremote_log_start_offset: {remote.remote_log_start_offset}\tremote_version: {remote.remote_version}"
    lso = log.delete_records(args.before_offset)
    emit(args, {**data, "low_watermark": lso}, f"partition: {log.tp}\tlow_watermark: {lso}{text}")
    return 0


COMMAND = Command(name="delete-records", help="advance a partition's log start offset", arguments=_arguments,
                  run=_run, precheck=check_delete_records)
