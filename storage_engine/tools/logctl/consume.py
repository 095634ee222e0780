"""``logctl consume``: print a partition's records as JSON lines (Kafka's
``kafka-console-consumer``), written as they are read."""

from __future__ import annotations

import argparse
import json
import sys

from ...logdir.manager import LogManager
from .arguments import CLOCK, COUNT, OFFSET, PARTITION, add_encoding, encoder
from .command import Command, LogDirs


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", help="the topic to read")
    parser.add_argument("--partition", type=PARTITION, required=True, help="the partition to read")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-offset", type=OFFSET, help="start at this offset (default: the log start offset)")
    start.add_argument("--from-timestamp", type=CLOCK,
                       help="start at the first record with a timestamp at or after this (ms since the epoch)")
    parser.add_argument("--max-records", type=COUNT, help="stop after this many records")
    add_encoding(parser, "how keys and values are written in the JSON lines")


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    log = manager.get_log(args.topic, args.partition)
    encode = encoder(args.encoding)
    log.refresh()
    if args.from_timestamp is not None:
        found = log.offset_for_timestamp(args.from_timestamp)
        if found is None:
            return 0
        offset = found[1]
    else:
        offset = log.log_start_offset if args.from_offset is None else args.from_offset
    remaining = args.max_records
    out = sys.stdout
    while remaining is None or remaining > 0:
        if offset >= log.log_end_offset:
            if offset > log.log_end_offset:
                log.read_batches(offset)  # raises the out-of-range error
            break
        # a read stops before a corrupt batch with the records before it; the next one, starting
        # there, raises, and the error is the command's (exit status 1) after those were printed
        records = log.read(offset, max_records=remaining if remaining is not None else 10_000)
        if not records:
            break
        for r in records:
            out.write(json.dumps({"offset": r.offset, "timestamp": r.timestamp, "key": encode(r.key),
                                  "value": encode(r.value), "headers": [[k, encode(v)] for k, v in r.headers]}) + "\n")
        offset = records[-1].offset + 1
        if remaining is not None:
            remaining -= len(records)
        log.refresh()
    out.flush()
    return 0


COMMAND = Command(name="consume", help="print records as JSON lines", arguments=_arguments, run=_run,
                  log_dirs=LogDirs.READ_ONLY)
