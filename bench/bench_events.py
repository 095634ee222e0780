"""What one event the state sensor records costs on the SQLite instance and on PostgreSQL.

    .venv/bin/python bench/bench_events.py [--partitions 300] [--rounds 2]

The state sensor's first tick over a topic of ``--partitions`` partitions records, per
partition, one ``AssetObservation`` and one ``log_health`` ``AssetCheckEvaluation``; the sensor
daemon writes each with ``DagsterInstance.report_runless_asset_event``, one at a time. This
evaluates that tick once (not timed) over a real log, then writes its events, timing each call,
into fresh instances made as an operator would: ``DAGSTER_HOME`` with the committed
``dagster.yaml`` (SQLite files under it), and the same file switched to PostgreSQL by the block
in docs/operations.md, on a throwaway local server (``tests/helpers/postgres.py``) with its
default durability (``fsync`` on) and, for the price of durability, with ``fsync`` and
synchronous commit off. Every round writes to each store in turn (a new instance each time) and
the best round is kept. Printed: milliseconds per observation, per check evaluation and per
event of each store, and the ratio to SQLite. Not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import dagster as dg

from platform_assets.tools.instance_setup import prepare_instance
from platform_assets.tools.workload import TopicWorkload, produce
from storage_engine.logdir.manager import LogManager
from tests.helpers.platform import definitions_for, tick
from tests.helpers.postgres import FAST_SETTINGS, PostgresServer, postgres_server, write_postgres_home


@dataclass
class Timing:
    """Seconds spent in ``report_runless_asset_event``, by kind of event."""

    observations: float = 0.0
    observation_count: int = 0
    checks: float = 0.0
    check_count: int = 0

    @property
    def per_event_ms(self) -> float:
        return 1000 * (self.observations + self.checks) / (self.observation_count + self.check_count)

    def line(self, name: str, baseline: Timing | None) -> str:
        ratio = f", {self.per_event_ms / baseline.per_event_ms:.2f}x SQLite's" if baseline else ""
        return (f"  {name:<28} {self.per_event_ms:6.2f} ms per event (observation "
                f"{1000 * self.observations / self.observation_count:6.2f} ms, check evaluation "
                f"{1000 * self.checks / self.check_count:6.2f} ms){ratio}")


def sensor_events(root: Path, partitions: int) -> Sequence:
    """The asset events of a first state-sensor tick over one topic of ``partitions`` partitions."""
    topic = TopicWorkload("bench", partitions, {"cleanup.policy": "compact", "segment.bytes": "4096"},
                          records=60, keys=10, value_bytes=40, batch_records=10)
    with LogManager([root]) as manager:
        produce(manager, [topic], now_ms=int(time.time() * 1000))
    defs, settings = definitions_for(root, max_observations_per_tick=2 * partitions)
    with dg.instance_for_test() as instance:
        return list(tick(defs, settings, instance, "log_state_sensor").asset_events)


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def write_all(home: Path, env: dict[str, str], events: Sequence) -> Timing:
    """A fresh instance in ``home`` (prepared as the main job prepares it), the events written to it."""
    timing = Timing()
    with environment(env):
        prepare_instance(home)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            for event in events:
                t0 = time.perf_counter()
                instance.report_runless_asset_event(event)
                spent = time.perf_counter() - t0
                if isinstance(event, dg.AssetCheckEvaluation):
                    timing.checks += spent
                    timing.check_count += 1
                else:
                    timing.observations += spent
                    timing.observation_count += 1
    return timing


def sqlite_home(base: Path) -> tuple[Path, dict[str, str]]:
    home = base / f"sqlite-{uuid.uuid4().hex[:8]}"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    return home, {"DAGSTER_HOME": str(home)}


def postgres_home(server: PostgresServer) -> Callable[[Path], tuple[Path, dict[str, str]]]:
    def make(base: Path) -> tuple[Path, dict[str, str]]:
        database = f"bench_{uuid.uuid4().hex[:8]}"
        server.create_database(database)
        home = base / database
        return home, write_postgres_home(home, server, database)
    return make


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-events-"))
    try:
        events = sensor_events(base / "logs", args.partitions)
        with ExitStack() as stack:
            stores = {"SQLite (committed yaml)": sqlite_home,
                      "PostgreSQL (durable)": postgres_home(stack.enter_context(postgres_server({}))),
                      "PostgreSQL (fsync off)": postgres_home(stack.enter_context(postgres_server(FAST_SETTINGS)))}
            print(f"{len(events)} events of a first state-sensor tick over {args.partitions} partitions, "
                  f"written one at a time with report_runless_asset_event; best of {args.rounds} round(s)")
            best: dict[str, Timing] = {}
            for _ in range(args.rounds):
                for name, make in stores.items():
                    timing = write_all(*make(base), events)
                    if name not in best or timing.per_event_ms < best[name].per_event_ms:
                        best[name] = timing
        baseline = best["SQLite (committed yaml)"]
        for name, timing in best.items():
            print(timing.line(name, None if timing is baseline else baseline))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
