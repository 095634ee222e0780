"""``logctl produce``: append JSON lines from stdin (Kafka's ``kafka-console-producer``).

The records are read and checked before the log dirs are opened, and every batch against the
topic's config before the log is: refused input changes nothing, all of it is appended or none.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ...config.values import MAX_TIMESTAMP_MS
from ...errors import RecordTooLargeError
from ...files.naming import check_not_metadata_log
from ...files.strict_json import DuplicateFieldError, unique_fields
from ...log.append_validation import ProducerRecord, build_batch
from ...log.segment import now_ms
from ...logdir.manager import LogManager
from ...record import CompressionType
from ..usage import UsageError
from .arguments import COUNT, PARTITION, add_clock, add_encoding, add_json, decoder, utf8
from .command import Command
from .output import emit

PRODUCE_BATCH_RECORDS = 1000


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", help="the topic to append to")
    parser.add_argument("--partition", type=PARTITION, required=True, help="the partition to append to")
    parser.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                        help="the record batches' compression codec")
    add_encoding(parser, "how keys and values are written in the JSON lines")
    parser.add_argument("--batch-size", type=COUNT, default=PRODUCE_BATCH_RECORDS, help="records per record batch")
    add_clock(parser, "the broker clock: default timestamps, and the bounds of message.timestamp.before.max.ms "
                      "and message.timestamp.after.max.ms (default: wall clock)")
    add_json(parser)


def read_records(stream: TextIO, encoding: str) -> list[ProducerRecord]:
    """The records of ``stream``'s JSON lines (``key``, ``value``, ``timestamp``, ``headers``)."""
    decode = decoder(encoding)
    records = []
    for lineno, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=unique_fields)
        except json.JSONDecodeError as exc:
            raise UsageError(f"stdin line {lineno}: not JSON: {exc}") from exc
        except RecursionError:  # Python's decoder recurses once per nested array or object
            raise UsageError(f"stdin line {lineno}: its JSON is nested too deeply") from None
        except DuplicateFieldError as exc:
            raise UsageError(f"stdin line {lineno}: {exc}") from None
        except ValueError:  # Python's decoder refuses a number of more than 4300 digits
            raise UsageError(f"stdin line {lineno}: a number of more than 4300 digits, which no field can hold") from None
        if not isinstance(obj, dict):
            raise UsageError(f"stdin line {lineno}: expected a JSON object with key/value, got {type(obj).__name__}")
        unknown = set(obj) - {"key", "value", "timestamp", "headers"}
        if unknown:
            raise UsageError(f"stdin line {lineno}: unknown field(s) {sorted(unknown)}")
        ts = obj.get("timestamp")
        if ts is not None and (not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts <= MAX_TIMESTAMP_MS):
            raise UsageError(f"stdin line {lineno}: timestamp must be an integer (ms) in 0..{MAX_TIMESTAMP_MS}, got {ts!r}")
        raw_headers = obj.get("headers")
        if raw_headers is not None and not isinstance(raw_headers, list):
            raise UsageError(f"stdin line {lineno}: headers must be a list of [key, value], got {raw_headers!r}")
        headers = []
        for h in raw_headers or []:
            if not (isinstance(h, list) and len(h) == 2 and isinstance(h[0], str)):
                raise UsageError(f"stdin line {lineno}: each header must be [key, value], got {h!r}")
            utf8(h[0], f"stdin line {lineno}: header key")
            headers.append((h[0], decode(h[1], f"stdin line {lineno}: header {h[0]!r} value")))
        records.append(
            ProducerRecord(
                decode(obj.get("key"), f"stdin line {lineno}: key"),
                decode(obj.get("value"), f"stdin line {lineno}: value"),
                ts,
                tuple(headers),
            )
        )
    return records


def _read_input(args: argparse.Namespace, log_dirs: list[Path], broker_props: Mapping[str, str]) -> None:
    """The records on stdin, read and checked before the log dirs are opened (an open is a
    change: the clean-shutdown marker is consumed, and written again at the close)."""
    if sys.stdin is None:  # started with stdin closed (``<&-``)
        raise UsageError("standard input is closed: produce reads its records from it")
    records = read_records(sys.stdin, args.encoding)
    if not records:
        raise UsageError("no records on stdin")
    if args.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, got {args.batch_size}")
    args.records = records


def check_produce(args: argparse.Namespace, manager: LogManager) -> None:
    """What ``produce`` is refused for before it changes anything (its precheck); the records
    themselves are checked against the topic's config in the run."""
    check_not_metadata_log(args.topic, "produce")
    if args.partition not in manager.partitions(args.topic):
        manager.get_log(args.topic, args.partition)  # raises, naming the partitions there are


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    records = args.records
    codec = CompressionType.from_name(args.compression)
    size = args.batch_size
    chunks = [records[i : i + size] for i in range(0, len(records), size)]
    now = args.now_ms if args.now_ms is not None else now_ms()
    check_produce(args, manager)
    # every batch is validated against the topic's config before the log is opened: a writable
    # open repairs what it finds (stray producer snapshots, say), and refused input changes nothing
    config, tp = manager.topic_config(args.topic), f"{args.topic}-{args.partition}"
    for chunk in chunks:
        try:
            build_batch(chunk, base_offset=0, config=config, compression=codec, now_ms=now, tp=tp)
        except RecordTooLargeError as exc:
            if len(chunk) == 1:
                raise
            raise RecordTooLargeError(f"{exc} A smaller --batch-size (now {size}) puts fewer records in each batch.") from None
    log = manager.get_log(args.topic, args.partition)
    infos = log.append_all(chunks, compression=codec, now=now)  # all of them or none
    first, last = infos[0].first_offset, infos[-1].last_offset
    emit(args, {"topic": args.topic, "partition": args.partition, "first_offset": first, "last_offset": last,
                "records": len(records)},
         f"Produced {len(records)} records to {log.tp} at offsets {first}..{last}")
    return 0


COMMAND = Command(
    name="produce",
    help="append JSON lines from stdin",
    arguments=_arguments,
    run=_run,
    precheck=check_produce,
    before_open=_read_input,
)
