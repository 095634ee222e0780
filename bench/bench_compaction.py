"""Benchmark: compaction of a large log against a raw sequential copy of the same bytes.

Two workloads, each a log of ``--size-mb`` megabytes (default 1024) in 128 MB segments of
uncompressed batches of many records, keys drawn uniformly at random:

* ``large``: 1 KB values, live keys = 10% of the records;
* ``small``: 100-byte values, live keys = 1% of the records;
* ``keys``: 100-byte values, every key distinct, a quarter of the size: more keys than the
  default 128 MB offset map holds, to show memory staying bounded (several passes).

For each it measures, in the same run and on the same files:

* a raw sequential copy of every segment into one new file (read, write, fsync): the I/O
  ceiling a cleaner that changed nothing could reach;
* ``Cleaner.clean`` in a fresh subprocess (so its peak RSS is its own): MB/s and records/s,
  the time split (header scan, map building, recopying, swap), and peak memory against the
  number of keys (the process's peak RSS while cleaning, from ``/proc/self/status`` VmHWM after
  resetting it through ``/proc/self/clear_refs``, minus its RSS before; and the offset map's own
  charged bytes per key).

With ``--strategy timestamp`` the topic compacts by KIP-280's ``timestamp`` strategy (every
record here has the same timestamp, so ties go by offset and the output is the offset
strategy's): the cost of the versioned path. ``--strategy compare`` cleans a copy of each log
both ways in the same run and prints the ratio.

Usage: ``python bench/bench_compaction.py [--size-mb 1024]
[--workload large|small|keys|all] [--strategy offset|timestamp|compare] [--dir DIR] [--keep]
[--json]``. Prints a table; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from crc32c import crc32c

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from storage_engine.config.topic import LogConfig  # noqa: E402
from storage_engine.log.segment import LogSegment  # noqa: E402
from storage_engine.logdir.manager import LogManager  # noqa: E402
from storage_engine.record.varint import encode_varint  # noqa: E402

MB = 1024 * 1024
SEGMENT_BYTES = 128 * MB
BATCH_BYTES = 256 * 1024
NOW = 1_700_000_000_000

WORKLOADS = {
    "large": {"value_size": 1000, "live_fraction": 0.10, "size_share": 1.0},
    "small": {"value_size": 100, "live_fraction": 0.01, "size_share": 1.0},
    # every key distinct, a quarter of the size: more keys than the default 128 MB map holds, so
    # memory must stay bounded and the cleaning takes several passes
    "keys": {"value_size": 100, "live_fraction": 1.0, "size_share": 0.25},
}


def _batch(base_offset: int, keys: list[bytes], value: bytes, ts: int) -> bytes:
    """One uncompressed v2 batch (baseTimestamp = every record's timestamp, delta 0)."""
    parts = []
    tail_value = encode_varint(len(value)) + value + b"\x00"
    for i, key in enumerate(keys):
        body = b"".join((b"\x00\x00", encode_varint(i), encode_varint(len(key)), key, tail_value))
        parts.append(encode_varint(len(body)))
        parts.append(body)
    payload = b"".join(parts)
    import struct

    tail = struct.pack(">hiqqqhii", 0, len(keys) - 1, ts, ts, -1, -1, -1, len(keys))
    crc = crc32c(payload, crc32c(tail))
    return struct.pack(">qiibI", base_offset, 49 + len(payload), 0, 2, crc) + tail + payload


def generate(root: Path, size_bytes: int, value_size: int, live_fraction: float, seed: int = 7) -> dict:
    """Write topic ``t`` partition 0 straight into segments (indexes built by LogSegment.append)."""
    with LogManager([root]) as m:
        m.admin.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
                                      "file.delete.delay.ms": "0"})
    part = root / "t-0"
    for name in os.listdir(part):  # whatever the manager created for an empty partition
        if name[:1].isdigit():
            os.unlink(part / name)
    config = LogConfig(segment_bytes=SEGMENT_BYTES, cleanup_policy=("compact",))
    key_len = 16
    record_size = 1 + 1 + 1 + 2 + 1 + key_len + 2 + value_size + 1  # about
    n_records = size_bytes // (record_size + 1)
    n_keys = max(1, int(n_records * live_fraction))
    per_batch = max(1, BATCH_BYTES // record_size)
    rnd = random.Random(seed)
    value = bytes(rnd.getrandbits(8) for _ in range(value_size))
    keys = [b"key-%012d" % i for i in range(n_keys)] if live_fraction < 1.0 else []
    offset = 0
    written = 0
    seg = None
    segs = 0
    while offset < n_records:
        if seg is None or seg.size + BATCH_BYTES + 1024 > SEGMENT_BYTES:
            if seg is not None:
                seg.on_become_inactive()
                seg.close()
            seg = LogSegment(part, offset, config, create=True)
            segs += 1
        count = min(per_batch, n_records - offset)
        if live_fraction >= 1.0:  # every key distinct
            batch_keys = [b"key-%012d" % i for i in range(offset, offset + count)]
        else:
            batch_keys = [keys[rnd.randrange(n_keys)] for _ in range(count)]
        data = _batch(offset, batch_keys, value, NOW)
        seg.append(offset + count - 1, NOW, offset + count - 1, data)
        offset += count
        written += len(data)
    seg.on_become_inactive()
    seg.close()
    LogSegment(part, offset, config, create=True).close()  # the (empty) active segment
    return {"records": n_records, "keys": n_keys, "bytes": written, "segments": segs, "records_per_batch": per_batch}


def raw_copy(part: Path, out: Path) -> tuple[int, float]:
    """Read every segment sequentially and write it to one file, fsynced: the I/O ceiling."""
    files = sorted(p for p in part.iterdir() if p.name.endswith(".log"))
    total = 0
    start = time.perf_counter()
    fd_out = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            try:
                pos = 0
                while True:
                    buf = os.pread(fd, 1 << 20, pos)
                    if not buf:
                        break
                    os.write(fd_out, buf)
                    pos += len(buf)
                    total += len(buf)
            finally:
                os.close(fd)
        os.fsync(fd_out)
    finally:
        os.close(fd_out)
    return total, time.perf_counter() - start


CHILD = textwrap.dedent("""
    import json, resource, sys, time
    sys.path.insert(0, sys.argv[2])
    from storage_engine.cleaner import LogCleaner, finish
    from storage_engine.logdir.manager import LogManager

    def status(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
        return 0

    m = LogManager([sys.argv[1]])
    m.admin.alter_topic("t", {"compaction.strategy": sys.argv[4]})
    log = m.get_log("t", 0)
    cleaner = LogCleaner(m).cleaner
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    except OSError:
        pass
    rss_before = status("VmRSS")
    t0 = time.perf_counter()
    report = cleaner.clean(log, now_ms=int(sys.argv[3]), force=True)
    wall = time.perf_counter() - t0
    finish(log, report, int(sys.argv[3]), cleaner)  # the report's after-figures, untimed
    rss_peak = status("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    m.close()
    print(json.dumps({"report": report.to_dict(), "wall_s": wall, "rss_before_kb": rss_before,
                      "rss_peak_kb": rss_peak}))
""")


def run_workload(name: str, size_mb: int, base_dir: Path, keep: bool, strategies: list[str]) -> list[dict]:
    """Generate the workload once, then clean it (a copy per strategy after the first)."""
    spec = WORKLOADS[name]
    root = base_dir / name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    info = generate(root, int(size_mb * MB * spec["size_share"]), spec["value_size"], spec["live_fraction"])
    gen_s = time.perf_counter() - t0
    part = root / "t-0"
    copy_bytes, copy_s = raw_copy(part, base_dir / f"{name}.rawcopy")
    os.unlink(base_dir / f"{name}.rawcopy")
    roots = {strategies[0]: root}
    for strategy in strategies[1:]:
        roots[strategy] = base_dir / f"{name}-{strategy}"
        shutil.copytree(root, roots[strategy])
    results = []
    for strategy in strategies:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(roots[strategy]), str(REPO), str(NOW), strategy],
                              capture_output=True, text=True, check=True)
        child = json.loads(proc.stdout.strip().splitlines()[-1])
        results.append(_result(name, strategy, spec, info, gen_s, copy_bytes, copy_s, child))
        if not keep:
            shutil.rmtree(roots[strategy])
    return results


def _result(name: str, strategy: str, spec: dict, info: dict, gen_s: float, copy_bytes: int, copy_s: float,
            child: dict) -> dict:
    rep = child["report"]
    peak_mb = (child["rss_peak_kb"] - child["rss_before_kb"]) / 1024
    return {
        "workload": name,
        "strategy": strategy,
        "value_size": spec["value_size"],
        "generated": info,
        "generate_s": round(gen_s, 1),
        "raw_copy_mb_s": round(copy_bytes / MB / copy_s, 1),
        "raw_copy_s": round(copy_s, 2),
        "compaction_s": round(child["wall_s"], 2),
        "compaction_mb_s": round(rep["bytes_read"] / MB / child["wall_s"], 1),
        "compaction_records_s": round(rep["records_read"] / child["wall_s"]),
        "vs_raw_copy": round((rep["bytes_read"] / MB / child["wall_s"]) / (copy_bytes / MB / copy_s), 3),
        "split_s": {k: rep[k] for k in ("scan_s", "index_s", "clean_s", "swap_s")},
        "records_read": rep["records_read"],
        "records_written": rep["records_written"],
        "distinct_keys": rep["distinct_keys"],
        "size_reduction_pct": rep["size_reduction_pct"],
        "passes": rep["passes"],
        "map_bytes_per_key": rep["map_bytes_per_entry"],
        "map_capacity_bytes": rep["map_capacity_bytes"],
        "peak_rss_mb": round(child["rss_peak_kb"] / 1024, 1),
        "peak_rss_over_baseline_mb": round(peak_mb, 1),
        "keys_per_pass_max": rep["map_entries_max"],
        "peak_bytes_per_key": round(peak_mb * MB / max(rep["map_entries_max"], 1), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="log size per workload (default 1024)")
    parser.add_argument("--workload", choices=["large", "small", "keys", "all"], default="all")
    parser.add_argument("--strategy", choices=["offset", "timestamp", "compare"], default="offset",
                        help="compaction.strategy of the topic (compare: both, same run)")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated logs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    base.mkdir(parents=True, exist_ok=True)
    names = list(WORKLOADS) if args.workload == "all" else [args.workload]
    strategies = ["offset", "timestamp"] if args.strategy == "compare" else [args.strategy]
    results = [r for n in names for r in run_workload(n, args.size_mb, base, args.keep, strategies)]
    if not args.keep and not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        g = r["generated"]
        print(f"== {r['workload']} ({r['strategy']} strategy): {g['bytes'] / MB:,.0f} MB, {g['records']:,} records of {r['value_size']} B values, "
              f"{g['keys']:,} keys, {g['records_per_batch']} records/batch, {g['segments']} segments")
        print(f"   raw sequential copy : {r['raw_copy_mb_s']:>8,.1f} MB/s ({r['raw_copy_s']} s)")
        print(f"   compaction          : {r['compaction_mb_s']:>8,.1f} MB/s, {r['compaction_records_s']:>10,} records/s "
              f"({r['compaction_s']} s, {r['vs_raw_copy']:.2f}x raw copy)")
        print(f"   time split (s)      : {r['split_s']}")
        print(f"   result              : {r['records_written']:,} of {r['records_read']:,} records kept, "
              f"{r['size_reduction_pct']:.1f}% smaller, {r['passes']} pass(es)")
        print(f"   memory              : peak RSS {r['peak_rss_mb']} MB, +{r['peak_rss_over_baseline_mb']} MB while "
              f"cleaning = {r['peak_bytes_per_key']:.0f} B per key held ({r['keys_per_pass_max']:,} keys in the "
              f"fullest pass, {r['distinct_keys']:,} over all passes); the map charges {r['map_bytes_per_key']:.0f} B/key "
              f"(Kafka: 24) against {r['map_capacity_bytes'] / MB:.0f} MB usable")
    if args.strategy == "compare":
        for offset, versioned in zip(results[::2], results[1::2], strict=False):
            print(f"== {offset['workload']}: timestamp strategy / offset strategy, same log, same run: "
                  f"time {versioned['compaction_s'] / offset['compaction_s']:.2f}x, map bytes per key "
                  f"{versioned['map_bytes_per_key']:.0f} vs {offset['map_bytes_per_key']:.0f}, peak bytes per key held "
                  f"{versioned['peak_bytes_per_key']:.0f} vs {offset['peak_bytes_per_key']:.0f}, records kept "
                  f"{versioned['records_written']:,} vs {offset['records_written']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
