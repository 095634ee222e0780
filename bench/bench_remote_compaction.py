"""Benchmark: compaction of the remote tier against the local cleaner, on the same log.

A log of ``--size-mb`` megabytes (default 1024; ``BENCH_REMOTE_MB`` too) of 100-byte values,
1% live keys, in 128 MB segments (``bench_compaction.py``'s ``small`` workload), is written
once and copied: one copy is an ordinary compacted topic, the other has
``remote.storage.enable=true``. A SeaweedFS (``weed mini``, the one the tests use) is started on
loopback. In the same run:

* **local**: ``LogCleaner.compact`` of the plain copy (the local cleaner);
* **remote**: the tiered copy is tiered first (not timed), then ``compact_remote``
  (materialize, clean, upload, commit) is timed, from a scratch directory.

It prints both times and their ratio beside the goal (at most 1.5x local), the remote run's
time split (download, clean, upload), its requests by type per GB of log, the bytes each way,
and a cost per GB at S3 Standard list prices (us-east-1: PUT/COPY/POST/LIST $0.005 per 1,000,
GET and others $0.0004 per 1,000, DELETE free; transfer inside a region free).

Usage: ``python bench/bench_remote_compaction.py [--size-mb 1024] [--dir DIR] [--json]``.
Prints a table; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_compaction import NOW, generate  # noqa: E402

from platform_assets.tools.object_store_server import seaweedfs  # noqa: E402
from storage_engine.cleaner import LogCleaner  # noqa: E402
from storage_engine.cleaner.remote_cleaning import compact_remote  # noqa: E402
from storage_engine.logdir.manager import LogManager  # noqa: E402
from storage_engine.remote import materialize as materialize_module  # noqa: E402
from storage_engine.remote.access import remote_partition  # noqa: E402
from storage_engine.remote.tiering import tier_partition  # noqa: E402

MB = 1024 * 1024
GB = 1024 * MB
GOAL = 1.5
#: S3 Standard, us-east-1 list prices (USD per request)
PRICE = {"PUT": 0.005 / 1000, "LIST": 0.005 / 1000, "GET": 0.0004 / 1000, "HEAD": 0.0004 / 1000, "DELETE": 0.0}


def _requests(counters: dict[str, int]) -> dict[str, int]:
    return {k.removeprefix("requests_").upper(): v for k, v in counters.items() if k.startswith("requests_")}


def run(size_mb: int, base: Path, scratch: Path) -> dict:
    plain, tiered = base / "plain", base / "tiered"
    t0 = time.perf_counter()
    info = generate(plain, size_mb * MB, 100, 0.01)
    shutil.copytree(plain, tiered)
    with LogManager([tiered]) as m:
        m.admin.alter_topic("t", {"remote.storage.enable": "true"})
    gen_s = time.perf_counter() - t0
    with seaweedfs(base / "s3") as server:
        os.environ.update(server.env(f"bench-{uuid.uuid4().hex[:8]}"))
        with LogManager([plain]) as m:
            t0 = time.perf_counter()
            local = LogCleaner(m).compact("t", 0, now_ms=NOW)
            local_s = time.perf_counter() - t0
        with LogManager([tiered]) as m:
            log = m.get_log("t", 0)
            rp = remote_partition("t", 0, log.config)
            t0 = time.perf_counter()
            tier_partition(log, rp, NOW, release_local=False)
            tier_s = time.perf_counter() - t0
            config = log.config
        t0 = time.perf_counter()
        remote = compact_remote(rp, config, now_ms=NOW, force=True, scratch_dir=scratch).report
        remote_s = time.perf_counter() - t0
        t0 = time.perf_counter()  # where the time beyond cleaning goes: the download alone, again
        materialize_module.materialize(rp, rp.read_version(1), scratch / "download-only")
        download_s = time.perf_counter() - t0
    assert local.status == remote.status == "compacted", (local.reason, remote.reason)
    assert (local.end_records, local.new_checkpoint) == (remote.end_records, remote.new_checkpoint)
    gb = info["bytes"] / GB
    requests = _requests(remote.requests)
    cost = sum(PRICE.get(kind, 0.0) * n for kind, n in requests.items()) / gb
    return {"size_mb": round(info["bytes"] / MB, 1), "segments": info["segments"], "records": info["records"],
            "keys": info["keys"], "generate_s": round(gen_s, 2), "tier_s": round(tier_s, 2),
            "local_s": round(local_s, 2), "remote_s": round(remote_s, 2), "ratio": round(remote_s / local_s, 3),
            "goal": GOAL, "remote_clean_s": round(remote.stats.scan_seconds + remote.stats.index_seconds
                                                   + remote.stats.clean_seconds + remote.stats.swap_seconds, 2),
            "download_s": round(download_s, 2), "requests": requests, "requests_per_gb": {k: round(v / gb, 1) for k, v in requests.items()},
            "bytes_downloaded": remote.requests.get("bytes_downloaded", 0),
            "bytes_uploaded": remote.requests.get("bytes_uploaded", 0),
            "cost_per_gb_usd": round(cost, 6), "transfer_threads": materialize_module.TRANSFER_THREADS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=int(os.environ.get("BENCH_REMOTE_MB", "1024")))
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--scratch", type=Path, default=None,
                        help="the remote compaction's scratch directory (default: in the work directory; "
                             "a tmpfs such as /dev/shm saves writing the download to disk)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="bench-remote-", dir=args.dir))
    scratch = Path(tempfile.mkdtemp(prefix="bench-remote-scratch-", dir=args.scratch or base))
    try:
        out = run(args.size_mb, base, scratch)
        out["scratch"] = "tmpfs" if args.scratch is not None and str(args.scratch).startswith("/dev/shm") else "disk"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    per_gb = ", ".join(f"{k} {v:,.1f}" for k, v in sorted(out["requests_per_gb"].items()))
    met = "met" if out["ratio"] <= GOAL else "not met"
    print(f"log: {out['size_mb']:,.0f} MB, {out['segments']} segments, {out['records']:,} records, "
          f"{out['keys']:,} keys (100-byte values)")
    print(f"local cleaner:      {out['local_s']:8.2f} s")
    print(f"remote compaction:  {out['remote_s']:8.2f} s (of which cleaning {out['remote_clean_s']:.2f} s; "
          f"tiering first took {out['tier_s']:.2f} s, not timed)")
    print(f"download alone:     {out['download_s']:8.2f} s (materialize of the tiered version, measured after)")
    print(f"ratio:              {out['ratio']:8.2f}x local (goal <= {GOAL}x: {met})")
    print(f"requests per GB:    {per_gb}")
    print(f"bytes:              {out['bytes_downloaded'] / MB:,.1f} MB down, {out['bytes_uploaded'] / MB:,.1f} MB up")
    print(f"cost per GB:        ${out['cost_per_gb_usd']:.6f} (S3 Standard list prices: PUT/LIST $0.005 per "
          "1,000, GET $0.0004 per 1,000, DELETE free)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
