"""Compaction of the remote tier killed at each step, on the real S3 server: the latest version
is the one before (killed before its commit) or the compacted one (after), complete either way
(every object it names is stored), and a re-run completes the compaction.

The compaction runs in a subprocess that SIGKILLs itself at the crash point
(``tests.helpers.crash.crash_env``), with the test's remote storage in its environment: the local
engine's ``LogCleaner``, or the Spark job, whose executor (a Python worker, killed in the task:
the job fails) or driver (killed after the tasks committed, before it remembers their versions)
dies.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from storage_engine.cleaner import LogCleaner
from storage_engine.logdir.manager import LogManager
from storage_engine.remote.access import remote_partition
from tests.helpers.cleaner import NOW
from tests.helpers.crash import crash_env
from tests.helpers.engine import append_each, open_topic, records
from tests.helpers.random_logs import tiered_records

JOB = textwrap.dedent("""
    import sys
    from storage_engine.cleaner import LogCleaner
    from storage_engine.logdir.manager import LogManager
    with LogManager([sys.argv[1]]) as m:
        LogCleaner(m).compact("t", 0, now_ms=int(sys.argv[2]))
""")

SPARK_JOB = textwrap.dedent("""
    import sys
    from spark_jobs.runtime.session import build_spark_session
    from spark_jobs.compaction import compact_partitions
    spark = build_spark_session("local[1]", conf={"spark.driver.memory": "512m"})
    compact_partitions(spark, [sys.argv[1]], [("t", 0)], now_ms=int(sys.argv[2]), force=False)
    spark.stop()
""")

#: (job, crash point, the version that is latest after the kill, the job's exit status)
POINTS = [
    (JOB, "remote-compaction.after-materialize", 1, -9),
    (JOB, "remote-compaction.after-upload", 1, -9),
    (JOB, "remote-compaction.after-commit", 2, -9),
    pytest.param(SPARK_JOB, "remote-compaction.after-upload", 1, 1, marks=pytest.mark.slow, id="spark-executor-upload"),
    pytest.param(SPARK_JOB, "remote-compaction.after-commit", 2, 1, marks=pytest.mark.slow, id="spark-executor-commit"),
    pytest.param(SPARK_JOB, "spark-compaction.after-tasks", 2, -9, marks=pytest.mark.slow, id="spark-driver-settle"),
]


@pytest.mark.parametrize(("job", "point", "latest", "status"), POINTS)
def test_a_kill_leaves_a_complete_version_and_a_rerun_completes(remote_env, tmp_path, job, point, latest,
                                                                status) -> None:
    root = tmp_path / "logs"
    with open_topic(root, segment_bytes=400, remote_storage_enable="true", cleanup_policy="compact",
                    min_cleanable_dirty_ratio="0.01") as manager:
        log = manager.get_log("t", 0)
        append_each(log, records(80, keys=5))
        log.roll()
        rp = remote_partition("t", 0, log.config)
        expected_keys = {r.key: r.value for r in records(80, keys=5)}
    env = {**crash_env(point, remote_env), "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([sys.executable, "-c", job, str(root), str(NOW)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # Spark's JVM, should it outlive its driver
    assert proc.returncode == status, err.decode()[-2000:]
    version = rp.latest()
    assert version.version == latest and rp.missing_objects(version) == []
    with LogManager([root]) as m:
        log = m.get_log("t", 0)
        seen = tiered_records(log, rp, tmp_path / "killed")
        assert {key: value for _, key, value, _, _ in seen} == expected_keys
        report = LogCleaner(m).compact("t", 0, now_ms=NOW)
        assert report.status in ("compacted", "skipped"), report.reason
        final = rp.latest()
        assert final.operation == "compact" and rp.missing_objects(final) == []
        after = tiered_records(log, rp, tmp_path / "rerun")
    assert {k: v for _, k, v, _, _ in after} == expected_keys and len(after) == len(expected_keys)
