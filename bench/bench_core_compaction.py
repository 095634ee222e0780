"""Benchmark: the compiled compaction core against the reference (issue 36's compaction rows).

The logs are ``bench_compaction.py``'s (uncompressed 256 KB batches, 16-byte keys, one 128 MB
segment size), written once per workload and cleaned by ``Cleaner.clean`` in a fresh subprocess
per core (``LOGPLAT_CORE``), the same way ``bench_compaction.py`` times it, on copies of the same
files:

* 100-byte values, 1% live keys: records/s, goal >= 8M (compiled);
* 100-byte values, every key distinct: records/s, goal >= 4M (the default 128 MB dedupe buffer
  holds every key of the compiled map in one pass; the reference's needs two at 128 MB);
* 1 KB values, 10% live keys: MB/s against a raw copy of the same bytes with fsync (read, write,
  fsync, same run), goal >= 0.8x;
* the compiled key map's bytes per 16-byte key once full (a 64 MB budget filled to refusal),
  goal <= 32, beside the reference dict's 224.

``rows(quick)`` returns the goal rows (``core_goals.GoalRow``); run as a script it prints them.
``--quick`` (or ``rows(quick=True)``) uses 32 MB logs instead of 128 MB.

Usage: ``python bench/bench_core_compaction.py [--quick] [--dir DIR]``. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_compaction  # noqa: E402
from core_goals import GoalRow, print_table  # noqa: E402

from storage_engine import native  # noqa: E402
from storage_engine.cleaner.offset_map import OffsetMap, entry_cost  # noqa: E402

MB = 1024 * 1024


def clean(root: Path, core: str) -> dict:
    """``bench_compaction``'s child (a fresh process, ``Cleaner.clean``) under ``core``."""
    env = {**os.environ, native.ENV_VAR: core}
    proc = subprocess.run([sys.executable, "-c", bench_compaction.CHILD, str(root), str(REPO),
                           str(bench_compaction.NOW), "offset"], capture_output=True, text=True, check=True, env=env)
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    rep = child["report"]
    return {"wall_s": child["wall_s"], "records": rep["records_read"], "bytes": rep["bytes_read"],
            "passes": rep["passes"], "records_s": rep["records_read"] / child["wall_s"],
            "mb_s": rep["bytes_read"] / MB / child["wall_s"]}


def both_cores(base: Path, name: str, size_mb: int, value_size: int, live_fraction: float) -> dict:
    """Generate one log, clean a copy under each core; also the raw copy of the same bytes."""
    root = base / name
    bench_compaction.generate(root, size_mb * MB, value_size, live_fraction)
    copy_bytes, copy_s = bench_compaction.raw_copy(root / "t-0", base / f"{name}.rawcopy")
    os.unlink(base / f"{name}.rawcopy")
    out = {"copy_mb_s": copy_bytes / MB / copy_s}
    for core in ("compiled", "reference"):
        work = base / f"{name}-{core}"
        shutil.copytree(root, work)
        out[core] = clean(work, core)
        shutil.rmtree(work)
    shutil.rmtree(root)
    return out


def key_map_bytes_per_key(budget: int = 64 * MB) -> float:
    """Bytes per 16-byte key of the compiled map filled to its budget."""
    prev = native.status().requested
    native.use("compiled")
    try:
        omap = OffsetMap(budget, 1.0)
        i = 0
        while omap.put(b"%016d" % i, i):
            i += 1
        return omap.bytes_per_entry
    finally:
        native.use(prev)


def _pair(res: dict, unit: str = "M rec/s") -> tuple[str, str]:
    c, r = res["compiled"], res["reference"]
    if unit == "MB/s":
        return (f"{c['mb_s']:.0f} MB/s ({c['passes']} pass)", f"reference {r['mb_s']:.0f} MB/s")
    return (f"{c['records_s'] / 1e6:.2f}M rec/s ({c['passes']} pass)",
            f"reference {r['records_s'] / 1e6:.2f}M ({r['passes']} pass, {c['records_s'] / r['records_s']:.1f}x)")


def rows(quick: bool = False, base_dir: str | None = None) -> list[GoalRow]:
    if native._MODULE is None:
        raise SystemExit("the compiled core is not built: nothing to compare")
    size = 32 if quick else 128
    base = Path(tempfile.mkdtemp(prefix="bench-core-compaction-", dir=base_dir))
    try:
        small = both_cores(base, "small", size, 100, 0.01)
        distinct = both_cores(base, "keys", size, 100, 1.0)
        large = both_cores(base, "large", size, 1000, 0.10)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = []
    fig, basel = _pair(small)
    out.append(GoalRow("compaction, 100-byte values, 1% live keys, records/s", fig, basel,
                       small["compiled"]["records_s"] / 1e6, 8, unit="M", note=f"{size} MB log"))
    fig, basel = _pair(distinct)
    out.append(GoalRow("compaction, 100-byte values, all keys distinct, records/s", fig, basel,
                       distinct["compiled"]["records_s"] / 1e6, 4, unit="M", note=f"{size} MB log"))
    c = large["compiled"]
    out.append(GoalRow("compaction, 1 KB values, vs a raw copy with fsync", f"{c['mb_s']:.0f} MB/s",
                       f"raw copy {large['copy_mb_s']:.0f} MB/s; reference {large['reference']['mb_s']:.0f} MB/s",
                       c["mb_s"] / large["copy_mb_s"], 0.8, note=f"{size} MB log, page cache"))
    per_key = key_map_bytes_per_key()
    out.append(GoalRow("exact key map, bytes per key (16-byte keys)", f"{per_key:.1f} B",
                       f"reference dict {entry_cost(16)} B", per_key, 32, unit=" B", higher_is_better=False,
                       note="full 64 MB map"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="32 MB logs instead of 128 MB")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = parser.parse_args(argv)
    print_table(rows(args.quick, args.dir), "compiled compaction core (issue 36)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
