"""Record codec throughput: ours vs kafka-python, side by side in one run.

    .venv/bin/python bench/bench_codec.py [--records 1000] [--repeat 25] [--codecs none,lz4,zstd]

For each codec, one batch of N records (16-byte key, 100-byte value, no headers, increasing
timestamps) is encoded once by each library; then:

* decode: parse the batch, check its CRC and read every record's key, value, offset,
  timestamp and headers (ours: ``scan_batches`` + ``decode_batch``; kafka-python:
  ``DefaultRecordBatch`` + ``validate_crc()`` + iteration). Each side decodes its own
  encoding of the same records; both encodings are also cross-checked to decode identically.
* encode: build the batch from the same records (ours: ``encode_batch``; kafka-python:
  ``DefaultRecordBatchBuilder.append`` + ``build``).
* arrow: ``batches_to_arrow`` on our batch (no kafka-python equivalent).

Timing is best-of-``repeat`` rounds of ~0.05 s, with the rounds of the compared functions
interleaved, which filters out the drift of shared (virtual) machines. Targets: decode >= 3x, encode >= 2x.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402

from storage_engine.record import CompressionType, Record, decode_batch, encode_batch, scan_batches  # noqa: E402
from storage_engine.record.columnar import batches_to_arrow  # noqa: E402


def make_records(n: int, seed: int = 7) -> list[Record]:
    rnd = random.Random(seed)
    words = [rnd.randbytes(6).hex().encode() for _ in range(64)]
    out = []
    for i in range(n):
        key = b"user-%011d" % rnd.randrange(10**11)  # 16 bytes
        value = b" ".join(rnd.choice(words) for _ in range(8))[:100].ljust(100, b".")  # 100 bytes, compressible
        out.append(Record(i, 1_700_000_000_000 + i * 3, key, value))
    return out


def _loops_for(fn, budget: float) -> int:
    fn()  # warm up (imports, specialisation of the interpreter's bytecode)
    t0 = time.perf_counter()
    fn()
    return max(1, int(budget / max(time.perf_counter() - t0, 1e-6)))


def best_rates(fns, items: int, repeat: int, budget: float = 0.05) -> list[float]:
    """Items per second of each function, best of ``repeat`` rounds. Rounds of the functions
    being compared are interleaved, so a slow phase of a shared machine hits all of them alike
    and the ratios stay meaningful even when absolute numbers drift."""
    loops = [_loops_for(fn, budget) for fn in fns]
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(loops[i]):
                fn()
            best[i] = min(best[i], (time.perf_counter() - t0) / loops[i])
    return [items / b for b in best]


def kp_encode(records: list[Record], codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for r in records:
        builder.append(r.offset, r.timestamp, r.key, r.value, [])
    return bytes(builder.build())


def kp_decode(data: bytes) -> int:
    batch = DefaultRecordBatch(data)
    if not batch.validate_crc():
        raise AssertionError("kafka-python: bad CRC")
    n = 0
    for r in batch:
        _ = r.key, r.value, r.offset, r.timestamp, r.headers  # read every field, as a consumer does
        n += 1
    return n


def our_decode(data: bytes) -> int:
    n = 0
    for raw in scan_batches(data):
        for r in decode_batch(raw):
            _ = r.key, r.value, r.offset, r.timestamp, r.headers
            n += 1
    return n


def our_arrow(data: bytes) -> int:
    return batches_to_arrow(scan_batches(data)).num_rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=25)
    ap.add_argument("--codecs", default="none,lz4,zstd")
    args = ap.parse_args()

    records = make_records(args.records)
    n = len(records)
    print(f"{n} records/batch, 16-byte keys, 100-byte values; best of {args.repeat}; records/s")
    header = f"{'codec':6} {'op':7} {'ours':>12} {'kafka-python':>13} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for name in args.codecs.split(","):
        codec = CompressionType.from_name(name)
        ours_bytes = encode_batch(records, base_offset=0, compression=codec)
        try:
            kp_bytes = kp_encode(records, int(codec))
        except Exception as exc:  # kafka-python without the library for this codec
            print(f"{name}: kafka-python cannot encode it here ({exc}); skipped")
            continue
        if kp_bytes[22] & 0x07 != int(codec):  # low byte of the int16 attributes
            print(f"{name}: kafka-python fell back to no compression; skipped")
            continue
        # Both encodings decode to the same records in both libraries.
        for data in (ours_bytes, kp_bytes):
            mine = [r for raw in scan_batches(data) for r in decode_batch(raw)]
            theirs = list(DefaultRecordBatch(data))
            assert [(r.offset, r.timestamp, r.key, r.value) for r in mine] == [
                (r.offset, r.timestamp, r.key, r.value) for r in theirs
            ] == [(r.offset, r.timestamp, r.key, r.value) for r in records]

        dec_ours, dec_kp, arrow = best_rates(
            [lambda b=ours_bytes: our_decode(b), lambda b=kp_bytes: kp_decode(b), lambda b=ours_bytes: our_arrow(b)], n, args.repeat
        )
        enc_ours, enc_kp = best_rates(
            [lambda c=codec: encode_batch(records, base_offset=0, compression=c), lambda c=codec: kp_encode(records, int(c))],
            n,
            args.repeat,
        )
        print(f"{name:6} {'decode':7} {dec_ours:12,.0f} {dec_kp:13,.0f} {dec_ours / dec_kp:6.2f}x")
        print(f"{name:6} {'encode':7} {enc_ours:12,.0f} {enc_kp:13,.0f} {enc_ours / enc_kp:6.2f}x")
        print(f"{name:6} {'arrow':7} {arrow:12,.0f} {'':>13} {'':>7}")
        print(f"{'':6} batch sizes: ours {len(ours_bytes):,} B, kafka-python {len(kp_bytes):,} B")


if __name__ == "__main__":
    main()
