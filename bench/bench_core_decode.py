"""The compiled record core's decode side against its goals (issue 36), in one run.

    .venv/bin/python bench/bench_core_decode.py [--quick]

Data: 20 batches of 1,000 records (16-byte keys, 100-byte values, no headers), as
``bench/bench_codec.py`` builds them, for each of none / lz4 / zstd.

* decode to record objects: ``scan_batches`` + ``decode_batch`` (CRC checked) and a consumer loop
  reading offset, timestamp, key, value and headers of each record, under the compiled core and
  the reference, against aiokafka 0.14's compiled codec (``DefaultRecordBatch(bytearray(batch))``,
  ``validate_crc()``, iteration reading the same fields). Goal: 1.5x aiokafka.
* decode to Arrow: ``batches_to_arrow`` (CRC checked) under the compiled core, in records/s
  (goals 15M none, 8M lz4 and zstd; the reference shown beside it). Decompression runs in
  Python's codec libraries, once per batch, and counts in the figure.

Rounds of the compared functions are interleaved and each figure is the median of the rounds,
so a slow phase of the shared machine hits every side alike.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka.record.default_records import DefaultRecordBatch  # noqa: E402

from bench.bench_codec import make_records  # noqa: E402
from bench.core_goals import GoalRow, print_table  # noqa: E402
from storage_engine import native  # noqa: E402
from storage_engine.record import CompressionType, decode_batch, encode_batch, scan_batches  # noqa: E402
from storage_engine.record.columnar import batches_to_arrow  # noqa: E402

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


def median_rates(fns: list[Callable[[], int]], rounds: int, budget: float) -> list[float]:
    """Items per second of each function: the median of ``rounds`` interleaved rounds of about
    ``budget`` seconds each."""
    loops = []
    for fn in fns:
        fn()
        t0 = time.perf_counter()
        fn()
        loops.append(max(1, int(budget / max(time.perf_counter() - t0, 1e-6))))
    rates: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            items = 0
            for _ in range(loops[i]):
                items += fn()
            rates[i].append(items / (time.perf_counter() - t0))
    return [statistics.median(r) for r in rates]


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


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    print_table(rows(quick=ap.parse_args().quick), "compiled record core: decode goals (issue 36)")
