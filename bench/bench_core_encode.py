"""The compiled record core's encode side against its goal (issue 36), in one run.

    .venv/bin/python bench/bench_core_encode.py [--quick]

Data: one batch of 1,000 records (16-byte keys, 100-byte values, no headers), as
``bench/bench_codec.py``'s ``make_records`` builds them.

* encode: ``encode_batch`` under the compiled core and the reference, against aiokafka 0.14's
  compiled ``DefaultRecordBatchBuilder`` (``append`` of every record, then ``build``), for none
  (the goal: 1.5x aiokafka) and lz4 / zstd (shown; both sides compress in their codec
  libraries, so the ratio there is mostly the codec's).
* rebuild: ``rebuild_v2_batch``, the cleaner's output batch, keeping every other record of the
  uncompressed batch (so every survivor after the first is copied as it is), compiled against
  the reference: no goal of its own (the compaction goals measure the whole cleaner), shown so a
  slower twin would be seen.

Rounds of the compared functions are interleaved and each figure is the median of the rounds,
so a slow phase of the shared machine hits every side alike.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from bench.bench_codec import make_records  # noqa: E402
from bench.core_goals import GoalRow, median_rates, print_table  # noqa: E402
from storage_engine import native  # noqa: E402
from storage_engine.record import CompressionType, Record, encode_batch, scan_batches  # noqa: E402
from storage_engine.record.rewrite import rebuild_v2_batch, record_bytes  # noqa: E402
from storage_engine.record.v2 import walk_records  # noqa: E402

RECORDS = 1000
GOAL = 1.5


def aiokafka_encode(records: list[Record], codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for r in records:
        builder.append(r.offset, r.timestamp, r.key, r.value, [])
    return bytes(builder.build())


def under(kind: str, fn: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        native.use(kind)
        return fn()
    return run


def _rebuild_case(records: list[Record]) -> tuple:
    data = encode_batch(records, base_offset=0)
    (raw,) = list(scan_batches(data))
    buf, start, end = record_bytes(raw)
    walked = walk_records(buf, raw.header.records_count, start, end)
    spans = [(w[0], w[1], w[3]) for w in walked[::2]]
    return raw.header, buf, spans


def counted(items: int, *fns: Callable[[], object]) -> list[Callable[[], int]]:
    """``fns`` as ``median_rates`` takes them: each call returns how many items it did."""
    return [lambda f=f: (f(), items)[1] for f in fns]


def rows(quick: bool = False) -> list[GoalRow]:
    """The encode goal's rows (compiled core required: the reference alone has no figure to show)."""
    prev = native.status().requested
    native.use("compiled")
    rounds, budget = (3, 0.03) if quick else (9, 0.08)
    records = make_records(RECORDS)
    out: list[GoalRow] = []
    try:
        for name in ("none", "lz4", "zstd"):
            codec = CompressionType.from_name(name)
            compiled, reference, theirs = median_rates(counted(
                RECORDS, under("compiled", lambda c=codec: encode_batch(records, base_offset=0, compression=c)),
                under("reference", lambda c=codec: encode_batch(records, base_offset=0, compression=c)),
                lambda c=codec: aiokafka_encode(records, int(c))), rounds, budget)
            out.append(GoalRow(f"encode (1,000-record batches), {name}", f"{compiled / 1e6:.2f}M rec/s",
                               f"aiokafka {theirs / 1e6:.2f}M, reference {reference / 1e6:.2f}M", compiled / theirs,
                               GOAL, note="" if name == "none" else "no goal for this codec: its compression is most of the time"))
        header, buf, spans = _rebuild_case(records)
        compiled, reference = median_rates(counted(
            len(spans), under("compiled", lambda: rebuild_v2_batch(header, buf, spans, None)),
            under("reference", lambda: rebuild_v2_batch(header, buf, spans, None))), rounds, budget)
        out.append(GoalRow("cleaner's rebuilt batch (every other record kept), none", f"{compiled / 1e6:.2f}M rec/s",
                           f"reference {reference / 1e6:.2f}M", compiled / reference, 1.0,
                           note="no goal of its own: the compaction goals measure the cleaner"))
    finally:
        native.use(prev)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    args = parser.parse_args()
    print_table(rows(args.quick), "compiled record core: encode (issue 36)")


if __name__ == "__main__":
    main()
