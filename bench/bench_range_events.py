"""How many events a range run of one topic records in Dagster's event log, per partition.

A sensor or sweep run over a range of partitions (``BackfillPolicy.single_run()``) records, per
partition, Dagster's planned materialization, the materialization, and the check evaluations the
run logs (the four compaction checks and ``log_health`` for a compacted topic). This runs one
range run of a compacted topic's cleanup job at each of two sizes (``--sizes``, small logs of a
few records per partition written through the engine, Spark ``local[2]``, in process on a SQLite
instance) and counts the run's events by type; the difference between the sizes over the
difference in partitions is the cost per partition, the rest the run's fixed events. Thousands
of partitions in one run cost what the per-partition figure says times their number (the count
is linear in the partitions: no event is repeated per partition and per step).

    .venv/bin/python bench/bench_range_events.py [--sizes 20 200]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

import dagster as dg

from platform_assets.definitions import build_definitions
from platform_assets.defs.resources import LogSparkResource, build_resources
from platform_assets.logic.settings import PlatformSettings
from platform_assets.tools.workload import TopicWorkload, produce
from spark_jobs.runtime.session import build_spark_session
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType

RANGE = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")


def range_run_events(root: Path, partitions: int) -> tuple[float, Counter]:
    """Seconds and the event types of one range run over every partition of a compacted topic."""
    workload = TopicWorkload("range", partitions, {"cleanup.policy": "compact", "segment.bytes": "2048"},
                             records=40, keys=8, value_bytes=40, batch_records=10,
                             compression=CompressionType.NONE)
    with LogManager([root]) as manager:
        produce(manager, [workload], now_ms=int(time.time() * 1000))
    settings = PlatformSettings(log_dirs=(str(root),), automation="stopped")
    defs = build_definitions(settings)
    resources = {**build_resources(settings), "pyspark": LogSparkResource(spark_config={})}
    asset = next(a for a in defs.assets if a.key == dg.AssetKey(["logs", "range"]))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("partitions__range", [str(p) for p in range(partitions)])
        started = time.perf_counter()
        result = dg.materialize([asset], instance=instance, resources=resources,
                                tags=dict(zip(RANGE, ("0", str(partitions - 1)), strict=True)))
        seconds = time.perf_counter() - started
        assert result.success
        kinds = Counter(e.dagster_event.event_type_value for e in instance.all_logs(result.run_id) if e.is_dagster_event)
        kinds["(log messages)"] = sum(1 for e in instance.all_logs(result.run_id) if not e.is_dagster_event)
    return seconds, kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[20, 200])
    args = parser.parse_args()
    small, large = args.sizes
    spark = build_spark_session("local[2]", app_name="bench-range-events",
                                conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    try:
        counts = {}
        for n in (small, large):
            with tempfile.TemporaryDirectory(prefix="bench-range-") as tmp:
                seconds, counts[n] = range_run_events(Path(tmp), n)
            print(f"range run over {n} partitions: {seconds:.1f} s, {sum(counts[n].values())} events")
        print(f"{'event type':<36} {small:>8} {large:>8}   per partition")
        for kind in sorted(set(counts[small]) | set(counts[large])):
            a, b = counts[small][kind], counts[large][kind]
            print(f"{kind:<36} {a:>8} {b:>8}   {(b - a) / (large - small):.2f}")
        total_a, total_b = sum(counts[small].values()), sum(counts[large].values())
        per = (total_b - total_a) / (large - small)
        print(f"{'all':<36} {total_a:>8} {total_b:>8}   {per:.2f} (fixed {total_a - per * small:.0f}); "
              f"a 2,000-partition run: ~{total_a + per * (2000 - small):.0f} events")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
