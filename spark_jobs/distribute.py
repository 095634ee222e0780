"""What Spark supplies to the jobs: the distribution, nothing else.

The engine decides and does every step of cleaning a partition; a job only chooses which task
runs which work item and brings the results back. Work items are packed into as many tasks as
there are task slots, largest first onto the least loaded task (the LPT rule), so a task slot
never waits on one task holding two large items while another holds only small ones, and each
task pays Spark's per-task cost once for many items. Items and results travel pickled: they are a
few small objects per item (a location, a config, a report), so there is no row-by-row
conversion and no JVM shuffle. The jobs run on a classic session and on a Spark Connect session
alike (:func:`run_tasks` picks the RDD API or ``mapInArrow``).
"""

from __future__ import annotations

import heapq
import os
import pickle
import re
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate
from typing import TypeVar

from .runtime.session import is_connect

T = TypeVar("T")
R = TypeVar("R")

_RESULTS_SCHEMA = "task long, results binary"
_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?$")


def task_slots(spark) -> int:
    """How many tasks run at once: the cores of a ``local[N]`` master (``local[*]``: this
    machine's), else Spark's default parallelism (the executors' cores on a cluster; on a Spark
    Connect session, ``spark.default.parallelism`` if the server sets it, else 2)."""
    if is_connect(spark):
        master = spark.conf.get("spark.master", "")
        parallelism = int(spark.conf.get("spark.default.parallelism", "2") or 2)
    else:
        master, parallelism = spark.sparkContext.master, spark.sparkContext.defaultParallelism
    m = _LOCAL.match(master)
    if m is None:
        return max(1, parallelism)
    if m.group(1) is None:
        return 1
    if m.group(1) == "*":
        return os.cpu_count() or 1
    return max(1, int(m.group(1)))


def pack(items: Sequence[T], size_of: Callable[[T], int], bins: int) -> list[list[T]]:
    """``items`` in at most ``bins`` lists of about equal total size: largest first onto the
    least loaded list (ties by order, so a packing is reproducible); empty lists are dropped."""
    loads = [(0, i) for i in range(max(1, bins))]
    out: list[list[T]] = [[] for _ in loads]
    for item in sorted(items, key=lambda it: -size_of(it)):
        load, i = heapq.heappop(loads)
        out[i].append(item)
        heapq.heappush(loads, (load + size_of(item), i))
    return [b for b in out if b]


def contiguous_parts(sizes: Sequence[int], parts: int) -> list[range]:
    """Indices ``0..len(sizes)-1`` cut into at most ``parts`` runs of consecutive items, each
    non-empty, each cut where the running total comes nearest an equal share: for work whose
    order matters (a partition's segments, where a later key replaces an earlier one)."""
    n = len(sizes)
    if n == 0:
        return []
    parts = max(1, min(parts, n))
    running = list(accumulate(sizes))
    total = running[-1]
    bounds = [0]
    for j in range(1, parts):
        share = total * j / parts
        first, last = bounds[-1] + 1, n - (parts - j)  # leave at least one item per later run
        bounds.append(min(range(first, last + 1), key=lambda i: abs(running[i - 1] - share)))
    bounds.append(n)
    return [range(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


def run_tasks(spark, tasks: Sequence[Sequence[T]], fn: Callable[[Sequence[T]], Iterable[R]]) -> list[R]:
    """One Spark task per list in ``tasks``, each running ``fn`` on its list (so a task can share
    what its items have in common, such as a log dir's checkpoints); the results of every task,
    in task order.

    On a classic session the lists and results travel pickled through the RDD API. A Spark
    Connect session has no RDD API: there the lists travel inside the task's function and the
    results come back pickled, one Arrow row per task (``mapInArrow`` over a range of task
    numbers). The RDD path is kept where it can be used because it is cheaper per job (measured
    with ``bench/bench_dagster_run.py``: a warm run's jobs 0.2 s instead of 0.35-0.45 s, a tiny
    job 0.14 s instead of 0.23 s)."""
    if not tasks:
        return []
    lists = [list(items) for items in tasks]
    if not is_connect(spark):
        return spark.sparkContext.parallelize(lists, len(lists)).mapPartitions(
            lambda parts: [r for items in parts for r in fn(items)]).collect()

    def run(batches):
        import pyarrow as pa

        for batch in batches:
            for i in batch.column(0).to_pylist():
                out = pickle.dumps(list(fn(lists[i])), protocol=pickle.HIGHEST_PROTOCOL)
                yield pa.RecordBatch.from_arrays([pa.array([i], pa.int64()), pa.array([out], pa.binary())],
                                                 names=["task", "results"])

    rows = spark.range(len(lists), numPartitions=len(lists)).mapInArrow(run, _RESULTS_SCHEMA).collect()
    return [r for row in sorted(rows, key=lambda row: row.task) for r in pickle.loads(row.results)]


def each(fn: Callable[[T], R]) -> Callable[[Sequence[T]], list[R]]:
    """``fn`` applied to every item of a task's list: for :func:`run_tasks`."""
    return lambda items: [fn(item) for item in items]


def attempt_id() -> str:
    """The running task attempt's id (unique across retries and speculative copies)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("attempt_id() outside a Spark task")
    return str(ctx.taskAttemptId())
