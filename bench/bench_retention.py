"""Planning retention for many partitions from files on disk, against a plain directory listing.

Builds N partition directories of real Kafka segments (three per partition: two rolled ones
with their final time-index entry, one active), then times, in the same run:

* the baseline: ``os.scandir`` of every partition directory plus one ``stat`` per segment;
* ``LogManager.retention_plans``: the same listing, the checkpoint files, and as many
  time-index tails as the rules need (the oldest segment of each partition at least).

    .venv/bin/python bench/bench_retention.py [--partitions 10000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import tempfile
import time
from pathlib import Path

from storage_engine.logdir.manager import LogManager
from storage_engine.record import Record, encode_batch

NOW = 1_700_000_000_000
DAY = 86_400_000


def build_tree(root: Path, partitions: int) -> None:
    """Partition dirs written directly in Kafka's layout (faster than appending through a log)."""
    with LogManager([root]) as m:
        m.admin.create_topic("bench", 1, {"retention.ms": str(7 * DAY)})
    topic_dir = root / "bench-0"
    template = {}
    for seg, (base, age_days) in enumerate([(0, 9), (100, 5), (200, 0)]):
        ts = NOW - age_days * DAY
        batch = encode_batch([Record(base + i, ts, b"k%d" % i, b"v" * 100) for i in range(100)], base_offset=base)
        template[base] = (batch, struct.pack(">qi", ts, 99), seg == 2)
    shutil.rmtree(topic_dir)
    for p in range(partitions):
        d = root / f"bench-{p}"
        d.mkdir()
        for base, (batch, tidx, active) in template.items():
            name = f"{base:020d}"
            (d / f"{name}.log").write_bytes(batch)
            (d / f"{name}.index").write_bytes(b"")
            (d / f"{name}.timeindex").write_bytes(b"" if active else tidx)
    meta = root / ".logplat-topics" / "bench.json"
    meta.write_text(meta.read_text().replace('"partitions": 1', f'"partitions": {partitions}'))


def baseline_listing(root: Path) -> int:
    n = 0
    for entry in os.scandir(root):
        if entry.is_dir() and "-" in entry.name:
            for f in os.scandir(entry.path):
                if f.name.endswith(".log"):
                    f.stat()
                    n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10_000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-retention-"))
    try:
        t0 = time.perf_counter()
        build_tree(tmp, args.partitions)
        print(f"built {args.partitions} partitions x 3 segments in {time.perf_counter() - t0:.1f} s")
        best_list = best_plan = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            segments = baseline_listing(tmp)
            best_list = min(best_list, time.perf_counter() - t)
            with LogManager([tmp], read_only=True) as m:
                t = time.perf_counter()
                plans = m.retention.plans("bench", now_ms=NOW)
                best_plan = min(best_plan, time.perf_counter() - t)
        deleting = sum(1 for p in plans if p.deleted_bases == (0,))
        assert len(plans) == args.partitions and deleting == args.partitions, (len(plans), deleting)
        n = args.partitions
        print(f"plain listing + stat of {segments} segments: {best_list * 1000:8.1f} ms "
              f"({best_list / n * 1e6:6.1f} us/partition)")
        print(f"retention plans for {n} partitions:        {best_plan * 1000:8.1f} ms "
              f"({best_plan / n * 1e6:6.1f} us/partition)  ratio {best_plan / best_list:.2f}x the listing")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
