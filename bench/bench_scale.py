"""The platform at 100,000 partitions (1,000 topics x 100): code location load, each sensor tick
and the state cache, against the goals of issue 34 (ticks under 5 s, load under 30 s).

The tree is written through the engine (``LogManager``: ``create_topic``, then per partition one
batch, a roll and one more batch of a few 100-byte records) for two template topics, and copied
for the others (``build_tree`` says why), half the topics ``compact`` (every
partition due: its rolled segment is all dirty) and half ``delete`` (every partition's rolled
segment past ``retention.ms``), so both run sensors judge every partition with work to choose
from. It is written on tmpfs by default (``/dev/shm``: the engine's fsyncs cost ~4 ms a partition
on this VM's disk; the sensors read file metadata, which a disk serves from the page cache as
well) and kept between runs with ``--keep``.

Then, in one run:

* **load**: ``platform_assets.definitions`` imported in a fresh process (Dagster's import, the log
  dirs' topic listing, ``build_definitions``), the repository resolved and its snapshot taken
  (``RepositorySnap.from_def``: what a code server sends the webserver and the daemon), and
  ``dagster definitions validate`` on the module, which loads the location as the webserver does;
* **state cache**: ``current_states`` over every partition with the cache empty (a code server's
  first read) and warm (nothing changed), and cold within a tick's ``state_read_budget_ms``;
* **ticks** against a real ``DagsterInstance`` (a temp ``DAGSTER_HOME``, SQLite, the project's
  ``dagster.yaml``), each evaluated as the daemon evaluates it and its results applied as the
  daemon applies them (dynamic partition requests, ``report_runless_asset_event`` per event):
  ``log_state_sensor`` from its first tick (the first ``MAX_KEYS_PER_TICK`` keys and
  ``max_observations_per_tick`` observations, within the state-read budget), its second, and
  its steady state (the keys and the cursor a full recording leaves, set directly: recording
  100,000 partitions takes hours of ticks, as it prints),
  then ``compaction_sensor``, ``retention_sensor``, ``deleted_files_sensor`` and one topic's
  ``sweep__<topic>`` schedule, each with the cache warm and emptied first (cold). Run requests are
  not launched (``bench_dagster_run.py`` measures runs).

    .venv/bin/python bench/bench_scale.py [--topics 1000] [--partitions 100] [--keep]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import dagster as dg

from platform_assets.definitions import build_definitions
from platform_assets.defs.jobs import STATES_TAG
from platform_assets.defs.partitions import partitions_def_name
from platform_assets.defs.resources import LogStore, build_resources
from platform_assets.defs.sensors import MAX_KEYS_PER_TICK, current_states
from platform_assets.logic.observation_cursor import ObservationCursor
from platform_assets.logic.settings import PlatformSettings
from platform_assets.logic.state_cache import RACY_NS, STATE_CACHE
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager

REPO = Path(__file__).resolve().parent.parent
DAY_MS = 86_400_000
TICK_GOAL_S = 5.0
LOAD_GOAL_S = 30.0
RECORDS = 6  # per batch; 3 distinct keys, so a compacted partition's rolled segment is all dirty

TOPIC_CONFIGS = (
    {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"},
    {"cleanup.policy": "delete", "retention.ms": str(DAY_MS)},
)


def topic_name(i: int) -> str:
    return f"scale{i:04d}"


def build_tree(root: Path, topics: int, partitions: int, now_ms: int) -> None:
    """Two template topics written through the engine (every partition: one batch two days old, a
    roll, one batch now), then each other topic a copy of one of them: its partition directories
    copied and its metadata file the template's with its own name and topic id (as
    ``bench_retention`` writes its tree). Creating every topic through the engine is quadratic in
    the partitions already in the log dirs (``Placement.create_partition_dir`` lists the log dir
    once per partition it places): ~0.1 s per partition at 5,000 partitions on tmpfs."""
    old = [ProducerRecord(b"k%d" % (j % 3), b"v" * 100, now_ms - 2 * DAY_MS + j, ()) for j in range(RECORDS)]
    new = [ProducerRecord(b"k%d" % (j % 3), b"v" * 100, now_ms + j, ()) for j in range(RECORDS)]
    with LogManager([root]) as manager:
        for i in range(min(topics, len(TOPIC_CONFIGS))):
            name = topic_name(i)
            manager.admin.create_topic(name, partitions, TOPIC_CONFIGS[i])
            for p in range(partitions):
                log = manager.get_log(name, p)
                log.append(old, now=now_ms)
                log.roll(now=now_ms)
                log.append(new, now=now_ms)
            manager.close_logs(name)
    metadata = root / ".logplat-topics"
    for i in range(len(TOPIC_CONFIGS), topics):
        template, name = topic_name(i % len(TOPIC_CONFIGS)), topic_name(i)
        for p in range(partitions):
            shutil.copytree(root / f"{template}-{p}", root / f"{name}-{p}")
        meta = json.loads((metadata / f"{template}.json").read_text())
        meta.update(name=name, topic_id=uuid.uuid4().hex)
        (metadata / f"{name}.json").write_text(json.dumps(meta, indent=2, sort_keys=True))


def prepared_tree(cache: Path, topics: int, partitions: int) -> Path:
    """The log dir for this size, written once and reused while ``cache`` is kept."""
    root, done = cache / f"{topics}x{partitions}" / "logs", cache / f"{topics}x{partitions}" / "complete"
    if done.exists():
        print(f"reusing the tree in {root}")
        return root
    shutil.rmtree(root.parent, ignore_errors=True)
    root.mkdir(parents=True)
    seconds, _ = timed(build_tree, root, topics, partitions, int(time.time() * 1000))
    done.write_text(f"{seconds:.1f}\n")
    print(f"wrote {topics} topics x {partitions} partitions through the engine in {seconds:.1f} s")
    time.sleep(RACY_NS / 1e9)  # states of directories changed in the last 2 s are not cached yet
    return root


def timed(fn: Callable, *args: object) -> tuple[float, object]:
    t = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - t, result


# ------------------------------------------------------------------------------- load

LOAD_SCRIPT = """
import json, time
t0 = time.perf_counter()
import dagster
t1 = time.perf_counter()
from platform_assets.definitions import defs
t2 = time.perf_counter()
repo = defs.get_repository_def()
t3 = time.perf_counter()
from dagster._core.remote_representation.external_data import RepositorySnap
RepositorySnap.from_def(repo)
t4 = time.perf_counter()
print(json.dumps({"import dagster": t1 - t0, "import + build_definitions": t2 - t1,
                  "repository resolved": t3 - t2, "snapshot": t4 - t3, "total": t4 - t0}))
"""


def load_env(root: Path) -> dict[str, str]:
    return {**os.environ, "LOGPLAT_LOG_DIRS": str(root), "LOGPLAT_AUTOMATION": "stopped",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def measure_load(root: Path) -> dict[str, float]:
    """The load in a fresh process, by phase, and ``dagster definitions validate`` whole."""
    env = load_env(root)
    out = subprocess.run([sys.executable, "-c", LOAD_SCRIPT], env=env, cwd=REPO, capture_output=True, text=True,
                         check=True)
    phases = json.loads(out.stdout.strip().splitlines()[-1])
    dagster_cli = Path(sys.executable).with_name("dagster")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-scale-home-") as home:
        subprocess.run([str(dagster_cli), "definitions", "validate", "-m", "platform_assets.definitions"],
                       env={**env, "DAGSTER_HOME": home}, cwd=REPO, capture_output=True, text=True, check=True)
    phases["dagster definitions validate"] = time.perf_counter() - started
    return phases


# ------------------------------------------------------------------------------- ticks


class Ticks:
    """Sensor and schedule ticks evaluated and applied as the daemon does, each timed."""

    def __init__(self, defs: dg.Definitions, settings: PlatformSettings, instance: dg.DagsterInstance) -> None:
        self.defs, self.instance = defs, instance
        self.repo = defs.get_repository_def()
        self.resources = build_resources(settings)
        self.written: dict[str, float] = {}  # seconds spent writing events, by kind
        self.counts: dict[str, int] = {}

    def sensor(self, name: str, cursor: str | None = None, *, apply: bool = True) -> tuple[float, float, object]:
        """(evaluation seconds, applying seconds, the tick's data)."""
        sensor = self.repo.get_sensor_def(name)
        t = time.perf_counter()
        with dg.build_sensor_context(instance_ref=self.instance.get_ref(), definitions=self.defs, cursor=cursor,
                                     resources=self.resources) as context:
            data = sensor.evaluate_tick(context)
        evaluated = time.perf_counter() - t
        t = time.perf_counter()
        if apply:
            for event in data.asset_events:
                started = time.perf_counter()
                self.instance.report_runless_asset_event(event)
                kind = type(event).__name__
                self.written[kind] = self.written.get(kind, 0.0) + time.perf_counter() - started
                self.counts[kind] = self.counts.get(kind, 0) + 1
        for request in data.dynamic_partitions_requests or ():
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        return evaluated, time.perf_counter() - t, data

    def schedule(self, name: str) -> tuple[float, object]:
        schedule = self.repo.get_schedule_def(name)
        t = time.perf_counter()
        with dg.build_schedule_context(instance=self.instance, resources=self.resources) as context:
            data = schedule.evaluate_tick(context)
        return time.perf_counter() - t, data


def report(label: str, seconds: float, goal: float | None, note: str = "") -> None:
    against = f"goal < {goal:g} s, {seconds / goal:5.2f}x the goal" if goal else "no goal"
    print(f"  {label:<58} {seconds:8.2f} s   ({against}){'; ' + note if note else ''}")


def measure_ticks(settings: PlatformSettings, home: Path, topics: int, partitions: int) -> None:
    n = topics * partitions
    load_s, defs = timed(build_definitions, settings)
    report("build_definitions in this process", load_s, LOAD_GOAL_S)
    log_store = LogStore(settings.log_dirs, settings.broker_props)

    STATE_CACHE.clear()
    cold, states = timed(current_states, log_store, settings)
    warm, _ = timed(current_states, log_store, settings)
    assert len(states) == n, f"{len(states)} states for {n} partitions"
    print(f"state cache over {n} partitions:")
    report("read, cold (every state computed)", cold, TICK_GOAL_S, f"{cold / n * 1e6:.0f} us/partition")
    report("read, warm (every state reused)", warm, TICK_GOAL_S, f"{warm / n * 1e6:.0f} us/partition")
    STATE_CACHE.clear()
    pending: set = set()
    budgeted, states = timed(current_states, log_store, settings, None, None, pending)
    report(f"read, cold, {settings.state_read_budget_ms} ms budget (a tick's read)", budgeted, TICK_GOAL_S,
           f"{len(states)} states computed, {len(pending)} left pending")

    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        ticks = Ticks(defs, settings, instance)
        print(f"log_state_sensor ({MAX_KEYS_PER_TICK} keys and {settings.max_observations_per_tick} "
              f"observations a tick at most, {settings.state_read_budget_ms} ms of state reads):")
        STATE_CACHE.clear()
        cursor = None
        for count in range(2):  # written as the daemon writes them
            evaluated, applied, data = ticks.sensor("log_state_sensor", cursor, apply=True)
            keys = sum(len(r.partition_keys or ()) for r in data.dynamic_partitions_requests or ())
            report(f"tick {count + 1}: evaluate (cache {'cold' if count == 0 else 'warm'})", evaluated, TICK_GOAL_S,
                   f"{keys} keys, {len(data.asset_events)} events")
            report(f"tick {count + 1}: apply (keys added, events written)", applied, TICK_GOAL_S)
            report(f"tick {count + 1}: whole", evaluated + applied, TICK_GOAL_S, data.skip_message or "")
            cursor = data.cursor
        for kind, seconds in ticks.written.items():
            print(f"  writing one {kind} (report_runless_asset_event): {seconds / ticks.counts[kind] * 1000:.1f} ms "
                  f"(mean of {ticks.counts[kind]})")
        per_event = sum(ticks.written.values()) / max(1, sum(ticks.counts.values()))
        full = math.ceil(n / settings.max_observations_per_tick)
        print(f"  first full recording at {settings.max_observations_per_tick} partitions a tick: {full} ticks, "
              f"{full * settings.sensor_interval_s / 3600:.1f} h at one tick every {settings.sensor_interval_s} s; "
              f"{2 * settings.max_observations_per_tick + 1} events a tick at {per_event * 1000:.1f} ms = "
              f"{(2 * settings.max_observations_per_tick + 1) * per_event:.1f} s")
        # the steady state without its hours of catching up (the sensor writes every result it
        # records itself, ~12 ms each): the keys and the cursor a full recording leaves
        for i in range(topics):
            have = set(instance.get_dynamic_partitions(partitions_def_name(topic_name(i))))
            instance.add_dynamic_partitions(partitions_def_name(topic_name(i)),
                                            [str(p) for p in range(partitions) if str(p) not in have])
        recorded = ObservationCursor.parse(cursor)
        for state in current_states(log_store, settings):
            recorded.record(state)
        recorded.rollups_due = []
        cursor = recorded.dump()
        assert sum(len(instance.get_dynamic_partitions(partitions_def_name(topic_name(i))))
                   for i in range(topics)) == n
        for cache in ("warm", "cold"):
            if cache == "cold":
                STATE_CACHE.clear()
            evaluated, _, data = ticks.sensor("log_state_sensor", cursor)
            assert not data.asset_events, "a steady tick recorded observations"
            report(f"steady tick, cache {cache}", evaluated, TICK_GOAL_S, data.skip_message or "")
        for name in ("compaction_sensor", "retention_sensor", "deleted_files_sensor"):
            print(f"{name}:")
            for cache in ("warm", "cold"):
                if cache == "cold":
                    STATE_CACHE.clear()
                evaluated, _, data = ticks.sensor(name)
                report(f"tick, cache {cache}", evaluated, TICK_GOAL_S,
                       f"{sum(len(r.tags[STATES_TAG].split(',')) for r in data.run_requests)} "
                       f"partition(s) requested in {len(data.run_requests)} run(s)" if data.run_requests else "no run")
        print("sweep schedule of one topic:")
        for cache in ("warm", "cold"):
            if cache == "cold":
                STATE_CACHE.clear()
            seconds, data = ticks.schedule(f"sweep__{topic_name(0)}")
            report(f"tick, cache {cache}", seconds, TICK_GOAL_S, f"{len(data.run_requests)} run(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--cache", type=Path, default=Path("/dev/shm/logplat-bench-scale"),
                        help="where the tree is written (tmpfs by default)")
    parser.add_argument("--keep", action="store_true", help="keep the tree for the next run")
    args = parser.parse_args()
    n = args.topics * args.partitions
    try:
        root = prepared_tree(args.cache, args.topics, args.partitions)
        print(f"code location load over {args.topics} topics ({n} partitions), fresh process:")
        phases = measure_load(root)
        for label, seconds in phases.items():
            goal = LOAD_GOAL_S if label in ("total", "dagster definitions validate") else None
            report(label, seconds, goal)
        settings = PlatformSettings(log_dirs=(str(root),), automation="stopped")
        with tempfile.TemporaryDirectory(prefix="bench-scale-home-") as home:
            measure_ticks(settings, Path(home), args.topics, args.partitions)
    finally:
        if not args.keep:
            shutil.rmtree(args.cache / f"{args.topics}x{args.partitions}", ignore_errors=True)


if __name__ == "__main__":
    main()
