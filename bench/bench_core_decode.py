"""The compiled record core's decode side against its goals (issue 36), in one run.

    .venv/bin/python bench/bench_core_decode.py [--quick]

Data: 20 batches of 1,000 records (16-byte keys, 100-byte values, no headers), as
``bench/bench_codec.py`` builds them, for each of none / lz4 / zstd.

* decode to record objects: ``scan_batches`` + ``decode_batch`` (CRC checked) and a consumer loop
  reading offset, timestamp, key, value and headers of each record, under the compiled core and
  the reference, against aiokafka 0.14's compiled codec (``DefaultRecordBatch(bytearray(batch))``,
  ``validate_crc()``, iteration reading the same fields). Goal: 1.5x aiokafka.
* decode to Arrow: ``batches_to_arrow`` (CRC checked) under the compiled core, in records/s
  (goals 15M none, 8M lz4 and zstd; the reference shown beside it). lz4 and zstd are
  decompressed inside the core (``native/src/codec.rs``), once per batch, and count in the figure.

``--where`` splits the compiled decode of lz4 and zstd batches into its parts, in ns per record
(the median of interleaved rounds): the scan and CRC (``scan_batches``, ``verify_v2``), the
decompression alone (``_core.decompress``, which adds one copy into ``bytes``), the walk to
``Record`` objects from plain records (``_core.decode_records`` given them), the consumer loop,
and aiokafka's whole decode beside them.

Rounds of the compared functions are interleaved and each figure is the median of the rounds,
so a slow phase of the shared machine hits every side alike.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka.record.default_records import DefaultRecordBatch  # noqa: E402

from bench.bench_codec import make_records  # noqa: E402
from bench.core_goals import GoalRow, median_rates, print_table  # noqa: E402
from storage_engine import native  # noqa: E402
from storage_engine.record import CompressionType, Record, decode_batch, encode_batch, scan_batches  # noqa: E402
from storage_engine.record.columnar import batches_to_arrow  # noqa: E402
from storage_engine.record.v2 import verify_v2  # noqa: E402

BATCHES = 20
RECORDS = 1000
ARROW_GOALS = {"none": 15.0, "lz4": 8.0, "zstd": 8.0}


def log_bytes(codec: CompressionType, batches: int = BATCHES) -> bytes:
    records = make_records(RECORDS)
    return b"".join(
        encode_batch([replace(r, offset=r.offset + i * RECORDS) for r in records], base_offset=i * RECORDS,
                     compression=codec)
        for i in range(batches))


def ours(data: bytes) -> int:
    n = 0
    for raw in scan_batches(data):
        for r in decode_batch(raw):
            _ = r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def aiokafka(batches: list[bytes]) -> int:
    n = 0
    for b in batches:
        batch = DefaultRecordBatch(bytearray(b))
        if not batch.validate_crc():
            raise AssertionError("aiokafka: bad CRC")
        for r in batch:
            _ = r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def arrow(data: bytes) -> int:
    return int(batches_to_arrow(scan_batches(data)).num_rows)


def under(kind: str, fn: Callable[[], int]) -> Callable[[], int]:
    def run() -> int:
        native.use(kind)
        return fn()
    return run


def rows(quick: bool = False) -> list[GoalRow]:
    """The decode goals' rows (compiled core required: the reference alone has no figure to show)."""
    prev = native.status().requested
    native.use("compiled")
    rounds, budget = (3, 0.03) if quick else (7, 0.08)
    out: list[GoalRow] = []
    try:
        for name in ("none", "lz4", "zstd"):
            data = log_bytes(CompressionType.from_name(name))
            batches = [bytes(raw.data) for raw in scan_batches(data)]
            assert ours(data) == aiokafka(batches) == BATCHES * RECORDS
            compiled, reference, theirs, arrow_c, arrow_r = median_rates(
                [under("compiled", lambda d=data: ours(d)), under("reference", lambda d=data: ours(d)),
                 lambda b=batches: aiokafka(b), under("compiled", lambda d=data: arrow(d)),
                 under("reference", lambda d=data: arrow(d))], rounds, budget)
            out.append(GoalRow(f"decode to record objects, {name}", f"{compiled / 1e6:.2f}M rec/s",
                               f"aiokafka {theirs / 1e6:.2f}M (reference {reference / 1e6:.2f}M)",
                               compiled / theirs, 1.5))
            out.append(GoalRow(f"decode to Arrow, {name}", f"{arrow_c / 1e6:.1f}M rec/s",
                               f"reference {arrow_r / 1e6:.2f}M", arrow_c / 1e6, ARROW_GOALS[name], unit="M rec/s"))
    finally:
        native.use(prev)
    return out


def where_time_goes() -> None:
    """Print the parts of the compiled decode of lz4 and zstd batches, in ns per record."""
    core = native._MODULE
    if core is None:
        raise SystemExit(f"the compiled core is not usable here: {native._WHY}")
    prev = native.status().requested
    native.use("compiled")
    try:
        for name in ("lz4", "zstd"):
            codec = CompressionType.from_name(name)
            data = log_bytes(codec)
            raws = list(scan_batches(data))
            batches = [bytes(raw.data) for raw in raws]
            plains = [core.decompress(int(codec), b[61:]) for b in batches]
            decoded = [decode_batch(raw) for raw in raws]

            def scan_crc(d: bytes = data) -> int:
                for raw in scan_batches(d):
                    verify_v2(raw)
                return BATCHES * RECORDS

            def decompression(bs: list[bytes] = batches, c: int = int(codec)) -> int:
                for b in bs:
                    core.decompress(c, memoryview(b)[61:])
                return BATCHES * RECORDS

            def objects(bs: list[bytes] = batches, ps: list = plains) -> int:
                for b, p in zip(bs, ps, strict=True):
                    core.decode_records(b, p, Record)
                return BATCHES * RECORDS

            def consumer(ds: list = decoded) -> int:
                n = 0
                for records in ds:
                    for r in records:
                        _ = r.offset, r.timestamp, r.key, r.value, r.headers
                        n += 1
                return n

            parts = ["scan + CRC", "decompression", "walk + Record objects", "consumer loop", "whole (ours)",
                     "aiokafka"]
            rates = median_rates([scan_crc, decompression, objects, consumer, lambda d=data: ours(d),
                                  lambda b=batches: aiokafka(b)], 7, 0.08)
            print(f"{name}: " + ", ".join(f"{part} {1e9 / rate:.0f} ns" for part, rate in zip(parts, rates, strict=True)))
    finally:
        native.use(prev)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    ap.add_argument("--where", action="store_true", help="where the compiled lz4/zstd decode spends its time")
    args = ap.parse_args()
    if args.where:
        where_time_goes()
    else:
        print_table(rows(quick=args.quick), "compiled record core: decode goals (issue 36)")
