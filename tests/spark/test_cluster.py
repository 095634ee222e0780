"""The Spark jobs on a REAL standalone cluster (master + one worker on loopback), against the
engine's local cleaner and retention, byte for byte.

Everything else under ``tests/`` uses an in-process ``local[2]`` session; here the tasks run in an
executor JVM the worker launched, whose Python workers import the engine from the zip the driver
shipped (``build_spark_session`` on a ``spark://`` master). A process can hold only one
SparkContext and this test run already has a local one (the ``spark`` fixture), so the cluster's
driver is a separate Python process (``DRIVER`` below) that prints its results as JSON.

The cluster comes from the pip distribution (``tests/helpers/spark_cluster.py``): ``spark-class`` runs the
standalone Master and Worker classes with ``SPARK_HOME`` set to the installed ``pyspark`` package.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spark_jobs.errors import SparkSetupError
from spark_jobs.runtime.session import check_java
from storage_engine.cleaner import LogCleaner
from storage_engine.logdir.manager import LogManager
from storage_engine.outcomes import COMPACTED, DELETED, NOTHING, PLANNED, SKIPPED
from tests.helpers.cleaner import NOW
from tests.helpers.paths import REPO
from tests.helpers.spark_cluster import cluster_env, standalone_cluster
from tests.spark.test_compaction import REPORT_FIELDS, assert_same_dirs, random_topic, retention_topic

APP_NAME = "logplat-cluster-test"
RETENTION_NOW = 100_000
DRIVER_TIMEOUT_S = 180

# The driver: compaction (one round per ``now``), then retention as a dry run and for real; one
# JSON line on stdout.
DRIVER = textwrap.dedent("""
    import json, sys, time
    t0 = time.monotonic()
    from spark_jobs.compaction import compact_partitions
    from spark_jobs.retention import retention_partitions
    from spark_jobs.runtime.session import build_spark_session

    master, log_dir, app_name = sys.argv[1], sys.argv[2], sys.argv[3]
    nows, retention_now = json.loads(sys.argv[4]), int(sys.argv[5])
    spark = build_spark_session(master, app_name=app_name, conf={
        "spark.driver.memory": "1g",
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "1",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.enabled": "false",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "spark.executor.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    })
    try:
        sc = spark.sparkContext
        out = {"master": sc.master, "app_id": sc.applicationId, "compaction": [],
               "session_s": time.monotonic() - t0, "compaction_s": []}
        for now in nows:
            result = compact_partitions(spark, [log_dir], now_ms=now, force=True)
            out["compaction_s"].append(result.duration_s)
            out["compaction"].append([o.to_dict() | {"topic": o.topic, "partition": o.partition}
                                      for o in result.outcomes])
        dry = retention_partitions(spark, [log_dir], now_ms=retention_now, dry_run=True)
        out["retention_dry"] = [o.to_dict() | {"plan": o.plan.to_dict()} for o in dry.outcomes]
        applied = retention_partitions(spark, [log_dir], now_ms=retention_now)
        out["retention"] = [o.to_dict() for o in applied.outcomes]
        out["retention_s"] = [dry.duration_s, applied.duration_s]
        # the driver's block manager plus at least one executor's: tasks ran on the worker
        out["block_managers"] = sc._jsc.sc().getExecutorMemoryStatus().size()
        # where the Python workers imported the engine from: the shipped zip, not the repository
        import storage_engine
        out["executor_engine"] = spark.range(1, numPartitions=1).rdd.map(
            lambda _: __import__("storage_engine").__file__).collect()[0]
        out["driver_engine"] = storage_engine.__file__
    finally:
        spark.stop()
    print("RESULT " + json.dumps(out), flush=True)
""")


def java_or_skip() -> None:
    try:
        check_java()
    except SparkSetupError as exc:
        pytest.skip(f"no usable Java for a Spark cluster: {exc}")


def run_driver(tmp_path: Path, master: str, log_dir: Path, nows: list[int]) -> dict:
    script = tmp_path / "cluster_driver.py"
    script.write_text(DRIVER)
    env = cluster_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    out_path, err_path = tmp_path / "driver.out", tmp_path / "driver.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(script), master, str(log_dir), APP_NAME, json.dumps(nows), str(RETENTION_NOW)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=tmp_path, start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=DRIVER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rc = None
        finally:  # the driver's own JVM is in its group too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stdout = out_path.read_text(errors="replace")
    stderr_tail = "\n".join(err_path.read_text(errors="replace").splitlines()[-60:])
    assert rc == 0, f"cluster driver {'timed out' if rc is None else f'exited with {rc}'}:\n{stderr_tail}"
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no result from the cluster driver:\n{stdout}\n{stderr_tail}"
    return json.loads(lines[-1][len("RESULT "):])


def local_compaction(root: Path, topic: str, partitions: int, now: int) -> dict:
    with LogManager([root]) as m:
        return {(topic, p): LogCleaner(m).compact(topic, p, now_ms=now, force=True).to_dict() for p in range(partitions)}


@pytest.mark.slow
def test_jobs_on_a_standalone_cluster_equal_the_local_engine_byte_for_byte(tmp_path):
    java_or_skip()
    local, remote = tmp_path / "local", tmp_path / "cluster"
    random_topic(local, "cc", seed=7, partitions=2)  # 6 and 8 segments, both cleanable
    retention_topic(local, "ret", 8)
    shutil.copytree(local, remote)
    nows = [NOW]

    started = time.monotonic()
    with standalone_cluster(tmp_path / "spark-cluster", cores=1, memory="1g") as cluster:
        up_s = time.monotonic() - started
        assert cluster.state()["aliveworkers"] >= 1
        got = run_driver(tmp_path, cluster.master_url, remote, nows)
        # the master saw the application run and finish
        deadline = time.monotonic() + 20
        while True:
            state = cluster.state()
            done = [a for a in state.get("completedapps", []) if a.get("id") == got["app_id"]]
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    print(f"\ncluster up in {up_s:.1f} s; driver: session {got['session_s']:.1f} s, compaction "
          f"{got['compaction_s']} s, retention dry/real {got['retention_s']} s; "
          f"whole test {time.monotonic() - started:.1f} s")

    # it really ran on the cluster
    assert got["master"] == cluster.master_url
    assert got["block_managers"] > 1, "no executor ever registered with the driver"
    assert done and done[0]["name"] == APP_NAME and done[0]["state"] == "FINISHED", state.get("completedapps")
    # the executors' Python workers imported the engine from the zip the driver shipped
    assert ".zip/storage_engine/" in got["executor_engine"], got["executor_engine"]
    assert ".zip" not in got["driver_engine"]

    # compaction: every round equals the local cleaner's, in what it counts and on disk
    for now, outcomes in zip(nows, got["compaction"], strict=False):
        expected = local_compaction(local, "cc", 2, now)
        by_tp = {(o["topic"], o["partition"]): o for o in outcomes}
        assert set(by_tp) == set(expected)  # only the compacted topic
        for tp, rep in expected.items():
            assert by_tp[tp]["engine"] == "spark"
            if rep["skipped"]:
                assert by_tp[tp]["status"] == SKIPPED, by_tp[tp]
                continue
            assert by_tp[tp]["status"] == COMPACTED, by_tp[tp]["reason"]
            assert {f: by_tp[tp][f] for f in REPORT_FIELDS} == {f: rep[f] for f in REPORT_FIELDS}, (now, tp)
    assert [o["status"] for o in got["compaction"][0]] == [COMPACTED, COMPACTED]

    # retention: the dry run's plans are the engine's for every partition (compacted topics too), the real
    # run deletes what the engine does
    with LogManager([local]) as m:
        plans = {(p.topic, p.partition): p for p in m.retention.plans(now_ms=RETENTION_NOW)}
        assert {(o["topic"], o["partition"]): o["plan"] for o in got["retention_dry"]} == {
            k: p.to_dict() for k, p in plans.items()}
        assert {o["status"] for o in got["retention_dry"]} == {PLANNED, NOTHING}
        applied = {(r.plan.topic, r.plan.partition): r for r in m.retention.apply(list(plans.values()),
                                                                                  now_ms=RETENTION_NOW)}
    assert sum(o["bytes_freed"] for o in got["retention"]) == sum(r.bytes_freed for r in applied.values()) > 0
    for o in got["retention"]:
        r = applied.get((o["topic"], o["partition"]))
        if r is None or not r.deleted_segments:
            assert o["status"] == NOTHING
        else:
            assert (o["status"], o["deleted_segments"], o["log_start_offset_after"]) == (
                DELETED, r.deleted_segments, r.new_log_start_offset)

    assert_same_dirs(local, remote)
