"""Where a Dagster-launched cleaning of a few small partitions spends its time.

    .venv/bin/python bench/bench_dagster_run.py [--partitions 4] [--partition-mb 2 16 64] [--master local[2]] [--connect]

A sensor's run is one run worker process: it builds the topic's cleanup job, starts a Spark
session on first use (the JVM), reads the latest values the checks compare, runs the compaction
job, observes the logs and checks the compactions (the engine's reads in packed Spark tasks).
This runs, in a fresh process and on a fresh instance, the cleanup job of a compacted topic over
``--partitions`` partitions of each ``--partition-mb`` size (one range run, as the compaction
sensor groups them), then the same on a fresh copy in the same process, whose session is warm.
Printed per run, from its timing tags (``logplat/spark_session_seconds``,
``logplat/spark_job_seconds``, ``logplat/check_read_seconds``): getting the session, the
cleaning jobs, the checks' reads and the rest; the difference between the two runs is the fixed
cost a run worker pays once (session start and the first jobs' warm-up).
``--connect`` starts a local Spark Connect server over ``--master`` first, waits for its warm-up
(``spark_jobs.runtime.warm_up``), and runs the workers against it (``LOGPLAT_SPARK_MASTER=sc://...``): the
server's first client, then a later one, as run workers meet a long-lived server (the two cost
the same when the warm-up did its work). Not a test.
"""

from __future__ import annotations

import argparse
import contextlib
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
    from platform_assets.defs.cleanup import CHECK_READ_SECONDS_TAG, SPARK_JOB_SECONDS_TAG, SPARK_SESSION_SECONDS_TAG
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
            out["runs"].append({"run_s": run_s, "session_s": float(tags[SPARK_SESSION_SECONDS_TAG]),
                                "job_s": float(tags[SPARK_JOB_SECONDS_TAG]), "read_s": float(tags[CHECK_READ_SECONDS_TAG])})
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
    """Each run's time split into its parts, from the run's timing tags: getting the session,
    the cleaning jobs, the checks' reads around them, and the rest (Dagster's own work: the run's
    events, resources, the engine's cheap observations)."""
    first, second = out["runs"]
    print(f"  the worker process lived {process_s:.1f} s (imports {out['import_s']:.1f} s)")
    for name, run in (("first run (fresh worker)", first), ("second run (warm session)", second)):
        rest = run["run_s"] - run["session_s"] - run["job_s"] - run["read_s"]
        print(f"  {name:<26} {run['run_s']:6.2f} s: session {run['session_s']:5.2f} s, cleaning jobs "
              f"{run['job_s']:5.2f} s, checks' reads {run['read_s']:5.2f} s, Dagster and the rest {rest:5.2f} s")
    work = second["job_s"] + second["read_s"]  # the run's work on the logs, without any warm-up
    print(f"  fixed cost of a run worker: {first['run_s'] - second['run_s']:.2f} s (session start "
          f"{first['session_s'] - second['session_s']:.2f} s, first jobs' warm-up "
          f"{first['job_s'] + first['read_s'] - work:.2f} s)")
    for name, run in (("fresh worker", first), ("warm session", second)):
        share = work / run["run_s"]
        print(f"  goal, most of the run spent cleaning (its jobs and the checks' reads, warm): {name} {share:.0%} "
              f"({'met' if share > 0.5 else 'NOT met'}); the cleaning jobs alone {second['job_s'] / run['run_s']:.0%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--partition-mb", type=float, nargs="+", default=[2.0, 16.0, 64.0],
                        help="one measurement per size, smallest first")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--connect", action="store_true",
                        help="run the workers against a local Spark Connect server over --master (started first, "
                             "not timed), as run workers would meet a long-lived one")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "bench"))
    from bench_spark import generate

    from spark_jobs.runtime.connect_server import free_port, start_server, stop_server

    base = Path(tempfile.mkdtemp(prefix="bench-dagster-run-"))
    try:
        with contextlib.ExitStack() as stack:
            master = args.master
            if args.connect:
                t0 = time.perf_counter()
                server = start_server(free_port(), args.master)
                stack.callback(stop_server, server)
                up_s = time.perf_counter() - t0
                warm = server.wait_warm()
                master = server.url
                print(f"a Spark Connect server over {args.master}, up in {up_s:.1f} s, "
                      f"{'warmed up' if warm else 'its warm-up FAILED'} {time.perf_counter() - t0 - up_s:.1f} s later")
            for mb in args.partition_mb:
                shutil.rmtree(base / "src", ignore_errors=True)
                size = int(mb * 2**20)
                info = generate(base / "src", "t", args.partitions, size, max(256 * 1024, size // 8))
                print(f"\n{args.partitions} partitions x {mb:g} MB ({info['bytes'] / 2**20:.0f} MB, "
                      f"{info['segments']} segments), Spark {master}")
                workers = ["a run worker"]
                if args.connect:  # the warm-up should leave nothing for the server's first client to warm
                    workers = ["the server's first run worker (after its warm-up)"] * (mb == args.partition_mb[0]) + [
                        "a later run worker (the server warm)"]
                for name in workers:
                    print(f" {name}:")
                    report(*run_worker(base, master, args.partitions))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
