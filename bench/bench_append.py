"""Append throughput of pre-encoded batches against a plain buffered write of the same bytes.

Both sides write the same producer-built v2 batches to a fresh file tree, neither fsyncs per
write (Kafka does not either by default), and each ends with one fsync so the numbers include
getting the data to disk. The engine's side also verifies every CRC, assigns offsets, rolls
segments and maintains the sparse indexes.

    .venv/bin/python bench/bench_append.py [--mb 256] [--records-per-batch 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType, Record, encode_batch


def make_batches(total_bytes: int, per_batch: int, codec: CompressionType) -> list[bytes]:
    value = os.urandom(50).hex().encode()[:100]
    proto = encode_batch(
        [Record(i, 1_700_000_000_000 + i, b"key-%012d" % i, value) for i in range(per_batch)],
        base_offset=0,
        compression=codec,
    )
    return [proto] * max(1, total_bytes // len(proto))


def plain_write(path: Path, batches: list[bytes]) -> float:
    start = time.perf_counter()
    with open(path, "wb") as f:
        for b in batches:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - start


def engine_append(root: Path, batches: list[bytes]) -> float:
    with LogManager([root]) as m:
        m.admin.create_topic("bench", 1, {"segment.bytes": str(256 << 20)})
        log = m.get_log("bench", 0)
        start = time.perf_counter()
        for b in batches:
            log.append_batch(b)
        log.flush()
        elapsed = time.perf_counter() - start
        assert log.log_end_offset == sum(int.from_bytes(b[23:27], "big") + 1 for b in batches)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--records-per-batch", type=int, nargs="*", default=[1000, 100])
    args = parser.parse_args()
    for per_batch in args.records_per_batch:
        for codec in (CompressionType.NONE, CompressionType.LZ4):
            batches = make_batches(args.mb << 20, per_batch, codec)
            size = sum(map(len, batches))
            tmp = Path(tempfile.mkdtemp(prefix="bench-append-"))
            raws, engs = [], []
            try:
                for _i in range(3):  # alternate, and clean up, so page-cache pressure hits both alike
                    raws.append(plain_write(tmp / "raw.bin", batches))
                    os.unlink(tmp / "raw.bin")
                    engs.append(engine_append(tmp / "logs", batches))
                    shutil.rmtree(tmp / "logs")
            finally:
                shutil.rmtree(tmp)
            raw, eng = min(raws), min(engs)
            mb = size / (1 << 20)
            print(f"{per_batch:5d} records/batch {codec.name.lower():5s} {len(batches):6d} batches {mb:7.1f} MB | "
                  f"plain write {mb / raw:8.1f} MB/s | engine append {mb / eng:8.1f} MB/s | "
                  f"ratio {raw / eng:.2f}x")


if __name__ == "__main__":
    main()
