"""Where a Dagster-launched cleaning of a few small partitions spends its time.

    .venv/bin/python bench/bench_dagster_run.py [--partitions 4] [--partition-mb 2] [--master local[2]] [--connect]

A sensor's run is one run worker process: it builds the topic's cleanup job, starts a Spark
session on first use (the JVM), runs the compaction job, observes the logs and checks the
compactions (the engine's reads in packed Spark tasks). This runs, in a fresh process and on a
fresh instance, the cleanup job of a compacted topic over ``--partitions`` partitions of
``--partition-mb`` MB (one range run, as the compaction sensor groups them), then the same on a fresh copy in the same
process, whose session is warm. Printed per run: its wall time, the Spark jobs' time
(the run tag ``logplat/spark_job_seconds``), and their share; the difference between the two
runs is the fixed cost a run worker pays once (session start and the first jobs' warm-up).
``--connect`` starts a local Spark Connect server over ``--master`` first and runs two workers
against it (``LOGPLAT_SPARK_MASTER=sc://...``): the server's first client, then a later one that
meets a warm server, as run workers meet a long-lived server. Not a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, shutil, sys, time
    t_import = time.perf_counter()
    src, work, repo, master = sys.argv[1:5]
    sys.path.insert(0, repo)
    import dagster as dg
    from platform_assets.definitions import build_definitions
    from platform_assets.defs.partitions import topic_partitions_def
    from platform_assets.logic.cleanup import SPARK_JOB_SECONDS_TAG
    from platform_assets.logic.settings import PlatformSettings
    import_s = time.perf_counter() - t_import

    out = {"import_s": import_s, "runs": []}
    with dg.instance_for_test() as instance:
        for i in range(2):
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(src, work)
            t0 = time.perf_counter()
            settings = PlatformSettings(log_dirs=(work,), automation="stopped", spark_master=master)
            defs = build_definitions(settings)
            job = next(j for j in defs.jobs if j.name.startswith("cleanup"))
            keys = [str(p) for p in range(int(sys.argv[5]))]
            instance.add_dynamic_partitions(topic_partitions_def("t").name, keys)
            result = defs.resolve_job_def(job.name).execute_in_process(
                instance=instance, tags={"dagster/asset_partition_range_start": keys[0],
                                         "dagster/asset_partition_range_end": keys[-1]})
            run_s = time.perf_counter() - t0
            assert result.success
            tags = instance.get_run_by_id(result.run_id).tags
            out["runs"].append({"run_s": run_s, "spark_job_s": float(tags[SPARK_JOB_SECONDS_TAG])})
    print("RESULT " + json.dumps(out))
""")


def run_worker(base: Path, master: str, partitions: int) -> tuple[dict, float]:
    """One run worker process (two runs); its results and how long it lived."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(base / "src"), str(base / "work"), str(REPO),
                           master, str(partitions)], capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the run worker failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):]), time.perf_counter() - t0


def report(out: dict, process_s: float) -> None:
    first, second = out["runs"]
    print(f"  the worker process lived {process_s:.1f} s (imports {out['import_s']:.1f} s)")
    for name, run in (("first run (fresh worker)", first), ("second run (warm session)", second)):
        print(f"  {name:<27} {run['run_s']:6.2f} s, Spark jobs {run['spark_job_s']:6.2f} s "
              f"({run['spark_job_s'] / run['run_s']:.0%} of the run)")
    print(f"  fixed cost of a run worker (session start, first jobs' warm-up): "
          f"{first['run_s'] - second['run_s']:.2f} s")
    for name, run in (("fresh worker", first), ("warm session", second)):
        share = run["spark_job_s"] / run["run_s"]
        print(f"  goal, most of a run spent cleaning: {name} {share:.0%} ({'met' if share > 0.5 else 'NOT met'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--partition-mb", type=float, default=2.0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--connect", action="store_true",
                        help="run the workers against a local Spark Connect server over --master (started first, "
                             "not timed), as run workers would meet a long-lived one")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "bench"))
    from bench_spark import generate
    from spark_jobs.connect_server import free_port, local_connect_server

    base = Path(tempfile.mkdtemp(prefix="bench-dagster-run-"))
    try:
        size = int(args.partition_mb * 2**20)
        info = generate(base / "src", "t", args.partitions, size, max(256 * 1024, size // 8))
        print(f"{args.partitions} partitions x {args.partition_mb:g} MB ({info['bytes'] / 2**20:.0f} MB, "
              f"{info['segments']} segments), Spark {args.master}{' behind a Spark Connect server' if args.connect else ''}")
        if not args.connect:
            report(*run_worker(base, args.master, args.partitions))
            return 0
        t0 = time.perf_counter()
        with local_connect_server(free_port(), args.master) as url:
            print(f"  server up in {time.perf_counter() - t0:.1f} s")
            for name in ("the server's first run worker", "a later run worker (the server warm)"):
                print(f" {name}:")
                report(*run_worker(base, url, args.partitions))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
