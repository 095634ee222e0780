"""``logctl consume``: print a partition's records as JSON lines (Kafka's
``kafka-console-consumer``, ``--isolation-level`` included), written as they are read; a tiered partition is read as one log
across its tiers (``remote.reads.TieredLog``)."""

from __future__ import annotations

import argparse
import json
import sys
from itertools import islice

from ...log.isolation import FetchIsolation
from ...logdir.manager import LogManager
from ...remote.reads import tiered_log
from .arguments import CLOCK, COUNT, OFFSET, PARTITION, add_as_of_version, add_encoding, encoder
from .command import Command, LogDirs


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", help="the topic to read")
    parser.add_argument("--partition", type=PARTITION, required=True, help="the partition to read")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-offset", type=OFFSET, help="start at this offset (default: the log start offset)")
    start.add_argument("--from-timestamp", type=CLOCK,
                       help="start at the first record with a timestamp at or after this (ms since the epoch)")
    parser.add_argument("--max-records", type=COUNT, help="stop after this many records")
    parser.add_argument("--isolation-level", choices=[i.value for i in FetchIsolation],
                        default=FetchIsolation.READ_UNCOMMITTED.value,
                        help="read_committed: stop at the last stable offset and leave out aborted "
                             "transactions, as Kafka's consumer does (default: read_uncommitted)")
    add_as_of_version(parser)
    add_encoding(parser, "how keys and values are written in the JSON lines")


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    log = manager.get_log(args.topic, args.partition)
    encode = encoder(args.encoding)
    log.refresh()
    view = tiered_log(log, as_of_version=args.as_of_version)  # one log across the tiers
    if args.from_timestamp is not None:
        found = view.offset_for_timestamp(args.from_timestamp)
        if found is None:
            return 0
        offset = found[1]
    else:
        offset = view.log_start_offset if args.from_offset is None else args.from_offset
    out = sys.stdout
    # records are printed as they are read: those before a damaged batch come out, then its
    # error is the command's (exit status 1)
    try:
        for r in islice(view.records_from(offset, isolation_level=args.isolation_level), args.max_records):
            out.write(json.dumps({"offset": r.offset, "timestamp": r.timestamp, "key": encode(r.key),
                                  "value": encode(r.value), "headers": [[k, encode(v)] for k, v in r.headers]}) + "\n")
    finally:
        out.flush()
    return 0


COMMAND = Command(name="consume", help="print records as JSON lines", arguments=_arguments, run=_run,
                  log_dirs=LogDirs.READ_ONLY)
