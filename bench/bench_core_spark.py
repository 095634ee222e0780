"""Benchmark: the issue 36 Spark row, one 1 GB partition compacted on one core and on two.

``bench_spark.py``'s ``one`` workload (a single partition of 1 KB-value records, every key written
twice; the local cleaner, then ``compact_partitions`` on a ``local[1]`` and on a ``local[2]``
session, each in its own process on fresh copies, the output compared byte for byte with the
local cleaner's), run once under each core (``LOGPLAT_CORE`` in the children). With one task slot
the partition is cleaned whole inside one task; with two it is split into two spans (key scan,
then recopy; ``docs/spark.md``). The row is ``time(local[1]) / time(local[2])`` under the
compiled core, beside the same ratio under the reference in the same run; goal >= 1.8x.

``rows(quick)`` returns the goal row (``core_goals.GoalRow``); run as a script it prints it and
each run's job times. ``--quick`` uses 320 MB in 64 MB segments (a partition is only split above
``MIN_SPLIT_BYTES``, 256 MB), the full run 1 GB in 128 MB segments.

Usage: ``python bench/bench_core_spark.py [--quick] [--dir DIR] [--repeat 2]``. Not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_spark import run_workload  # noqa: E402
from core_goals import GoalRow, print_table  # noqa: E402

from storage_engine import native  # noqa: E402


def one_partition(core: str, base: Path, size_mb: int, segment_mb: int, repeat: int) -> dict:
    """``bench_spark``'s ``one`` workload with its children under ``core``; refuses a result that
    differs from the local cleaner's."""
    before = os.environ.get(native.ENV_VAR)
    os.environ[native.ENV_VAR] = core
    try:
        out = run_workload(f"one-{core}", 1, size_mb, segment_mb, base, False, {}, repeat)
    finally:
        if before is None:
            os.environ.pop(native.ENV_VAR, None)
        else:
            os.environ[native.ENV_VAR] = before
    for engine in ("local[1]", "local[2]"):
        if not out["engines"][engine]["identical"]:
            raise SystemExit(f"spark {engine} under the {core} core differs from the local cleaner: "
                             f"{out['engines'][engine]['differences']}")
    return out


def times(run: dict) -> str:
    e = run["engines"]
    return (f"local {e['local']['job_s']:.2f} s, local[1] {e['local[1]']['job_s']:.2f} s, "
            f"local[2] {e['local[2]']['job_s']:.2f} s")


def rows(quick: bool = False, base_dir: str | None = None, repeat: int = 2) -> list[GoalRow]:
    if native._MODULE is None:
        raise SystemExit("the compiled core is not built: nothing to compare")
    size_mb, segment_mb = (320, 64) if quick else (1024, 128)
    base = Path(tempfile.mkdtemp(prefix="bench-core-spark-", dir=base_dir))
    try:
        runs = {core: one_partition(core, base, size_mb, segment_mb, repeat) for core in ("compiled", "reference")}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    c, r = runs["compiled"], runs["reference"]
    return [GoalRow("Spark, one 1 GB partition, 1 -> 2 cores", times(c),
                    f"reference {r['scaling_1_to_2_cores']:.2f}x ({times(r)})", c["scaling_1_to_2_cores"], 1.8,
                    note=f"{size_mb} MB, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; output identical")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="320 MB instead of 1 GB")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per engine, the best counts")
    args = parser.parse_args(argv)
    print_table(rows(args.quick, args.dir, args.repeat), "Spark scaling under the compiled core (issue 36)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
