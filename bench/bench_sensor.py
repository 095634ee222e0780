"""One sensor tick over 10,000 partitions on disk, against a plain directory listing of the same tree.

Builds N partition directories of real Kafka segments (``bench_retention``'s tree: three
segments per partition, two rolled and one active) in one ``compact,delete`` topic, so every
sensor covers every partition with both verdicts (dirty ratio and retention). The Dagster
definitions are built over it and the partition keys added as the state sensor adds them, on a
SQLite test instance. Then, in the same run, best of three:

* the baseline: ``os.scandir`` of every partition directory plus one ``stat`` per segment;
* one tick of each sensor, evaluated as the daemon evaluates it (``evaluate_tick`` with the
  instance: partition keys loaded and run requests resolved), in the steady state (the process's
  state cache warm, nothing changed on disk: what every tick costs between changes) and with the
  cache emptied first (every partition's state recomputed: a code server's first tick, and the
  cost of a tick in which everything changed): ``compaction_sensor`` and
  ``retention_sensor`` (every partition is due for both; the compaction sensor requests one
  range run over its per-tick bound of partitions, the retention sensor none, since a
  ``compact,delete`` compaction run applies retention), and
  ``log_state_sensor`` in its steady state (nothing changed since its last tick).

    .venv/bin/python bench/bench_sensor.py [--partitions 10000]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import dagster as dg
from bench_retention import baseline_listing, build_tree

from platform_assets.definitions import build_definitions
from platform_assets.defs.resources import build_resources
from platform_assets.logic.settings import PlatformSettings
from platform_assets.logic.state_cache import RACY_NS, STATE_CACHE
from storage_engine.logdir.manager import LogManager

TOPIC = "bench"


def make_tick(defs: dg.Definitions, settings: PlatformSettings, instance: dg.DagsterInstance, name: str):
    sensor = defs.get_repository_def().get_sensor_def(name)
    resources = build_resources(settings)

    def tick(cursor: str | None = None):
        context = dg.build_sensor_context(instance_ref=instance.get_ref(), definitions=defs, cursor=cursor,
                                          resources=resources)
        return sensor.evaluate_tick(context)

    return tick


def timed(fn, *args):
    t = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - t, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10_000)
    args = parser.parse_args()
    n = args.partitions
    tmp = Path(tempfile.mkdtemp(prefix="bench-sensor-"))
    try:
        t0 = time.perf_counter()
        build_tree(tmp, n)
        with LogManager([tmp]) as manager:
            manager.admin.alter_topic(TOPIC, {"cleanup.policy": "compact,delete"})
        print(f"built {n} partitions x 3 segments in {time.perf_counter() - t0:.1f} s")
        time.sleep(RACY_NS / 1e9)  # states of directories changed in the last 2 s are not cached yet
        settings = PlatformSettings(log_dirs=(str(tmp),), automation="stopped", max_observations_per_tick=n)
        load_s, defs = timed(build_definitions, settings)
        print(f"definitions loaded in {load_s:.2f} s")
        with dg.instance_for_test() as instance:
            state = make_tick(defs, settings, instance, "log_state_sensor")
            first_s, first = timed(state)
            for request in first.dynamic_partitions_requests:
                instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
            print(f"first log_state_sensor tick: {first_s * 1000:8.1f} ms ({len(first.asset_events)} observations, "
                  f"{sum(len(r.partition_keys) for r in first.dynamic_partitions_requests)} keys to add; "
                  f"cursor {len(first.cursor) / 1024:.0f} KiB)")
            ticks = {"compaction_sensor": make_tick(defs, settings, instance, "compaction_sensor"),
                     "retention_sensor": make_tick(defs, settings, instance, "retention_sensor"),
                     "log_state_sensor": lambda: state(first.cursor)}
            best = {name: float("inf") for name in ["listing", *ticks, *(f"{t} (no cache)" for t in ticks)]}
            results, reused = {}, {}
            for _ in range(3):
                listing_s, segments = timed(baseline_listing, tmp)
                best["listing"] = min(best["listing"], listing_s)
                for name, tick in ticks.items():
                    seconds, results[name] = timed(tick)
                    best[name] = min(best[name], seconds)
                    reused[name] = STATE_CACHE.reused
                    STATE_CACHE.clear()
                    seconds, _ = timed(tick)
                    best[f"{name} (no cache)"] = min(best[f"{name} (no cache)"], seconds)
        (request,) = results["compaction_sensor"].run_requests  # one range run over the first partitions due
        assert request.tags["dagster/asset_partition_range_end"] == str(settings.max_partitions_per_tick - 1)
        # every partition is also due for compaction, whose run applies retention: none for this sensor
        assert not results["retention_sensor"].run_requests
        assert not results["log_state_sensor"].asset_events
        base = best["listing"]
        print(f"plain listing + stat of {segments} segments: {base * 1000:8.1f} ms ({base / n * 1e6:6.1f} us/partition)")
        for name in best:
            if name == "listing":
                continue
            s = best[name]
            note = f"; {reused[name]} states reused" if name in reused else ""
            print(f"{name:>28} tick: {s * 1000:8.1f} ms ({s / n * 1e6:6.1f} us/partition)  "
                  f"ratio {s / base:.2f}x the listing{note}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
