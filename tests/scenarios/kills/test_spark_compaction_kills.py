"""The Spark compaction job killed at each step of its commit: a reload finds the content before
or after, never a mix, and none of the job's staged output survives it.

The driver is a real subprocess that SIGKILLs itself (``tests.helpers.crash.crash_env``) after the tasks wrote
their staging directories, after it moved their output in as ``.cleaning``, in the middle of
preparing the swap, and after the commit point; each kill takes Spark's JVM with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from storage_engine.cleaner import LogCleaner
from storage_engine.logdir.manager import LogManager
from storage_engine.tools.verify import verify_log
from tests.helpers.cleaner import NOW, content
from tests.helpers.crash import crash_env
from tests.scenarios.kills.test_cleaner_kills import build

JOB = textwrap.dedent("""
    import sys
    from spark_jobs.runtime.session import build_spark_session
    from spark_jobs.compaction import compact_partitions
    spark = build_spark_session("local[1]", conf={"spark.driver.memory": "512m"})
    split = None if sys.argv[3] == "whole" else 0
    compact_partitions(spark, [sys.argv[1]], [("t", 0)], now_ms=int(sys.argv[2]), force=True, split_bytes=split)
    spark.stop()
""")

#: (crash point, what a reload shows, how the partition is cleaned). A split partition is swapped
#: by the driver, which the point kills; a whole one by its task's Python worker, whose death
#: fails the job (the driver exits 1).
POINTS = [
    ("spark-compaction.after-tasks", "before", "split"),
    ("spark-compaction.after-staged-moved", "before", "split"),
    ("compaction.cleaned-to-swap-2", "before", "split"),
    ("compaction.after-old-deleted", "after", "split"),
    ("compaction.after-cleaned-written", "before", "whole"),
    ("compaction.cleaned-to-swap-2", "before", "whole"),
    ("compaction.after-old-deleted", "after", "whole"),
]


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    root = tmp_path_factory.mktemp("model")
    build(root)
    with LogManager([root]) as m:
        before = content(m.get_log("t", 0))
        LogCleaner(m).compact("t", 0, now_ms=NOW)
        after = content(m.get_log("t", 0))
    assert before != after
    return {"before": before, "after": after}


@pytest.mark.slow
@pytest.mark.parametrize("point,state,how", POINTS)
def test_a_killed_job_leaves_the_content_before_or_after(tmp_path, expected, point, state, how):
    build(tmp_path)
    env = {**crash_env(point), "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([sys.executable, "-c", JOB, str(tmp_path), str(NOW), how], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=240)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the JVM, should it outlive its driver
        except ProcessLookupError:
            pass
    assert proc.returncode == (-signal.SIGKILL if how == "split" else 1), err.decode()[-2000:]
    if how == "whole":
        assert "SparkJobError" in err.decode()
    with LogManager([tmp_path]) as m:
        log = m.get_log("t", 0)
        assert content(log) == expected[state]
        assert verify_log(log).ok
    leftovers = [n for n in os.listdir(tmp_path / "t-0")
                 if n.endswith((".cleaning", ".cleaned", ".swap")) or n.startswith(".logplat-staging")]
    assert leftovers == []
