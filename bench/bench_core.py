"""Benchmark: the compiled record core's goals table (issue 36), every row in one run.

Runs the four ``bench_core_*`` benchmarks (decode to records and to Arrow; encode; compaction
and the key map; Spark's 1 -> 2 cores), each measuring the compiled core beside its baseline in the same run (the
reference, aiokafka's compiled codec, a raw copy with fsync), and prints their rows as one table
with the goal beside each ratio (``core_goals.print_table``).

Usage: ``python bench/bench_core.py [--quick]``. ``--quick``: small inputs, a smoke run (a few
minutes: the Spark row starts its sessions either way); the figures for ``bench/README.md`` come
from a full run on a quiet machine. Not a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmarks, run from anywhere

import bench_core_compaction  # noqa: E402
import bench_core_decode  # noqa: E402
import bench_core_encode  # noqa: E402
import bench_core_spark  # noqa: E402
from core_goals import print_table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs: a smoke run of every row")
    args = parser.parse_args(argv)
    rows = [row for bench in (bench_core_decode, bench_core_encode, bench_core_compaction, bench_core_spark)
            for row in bench.rows(quick=args.quick)]
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
