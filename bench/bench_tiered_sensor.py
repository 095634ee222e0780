"""A tiering sensor tick over 10,000 tiered partitions (100 topics x 100), against issue 35's
goal: under 1 s.

The tree is built cheaply, as ``bench_scale.py`` builds its 100,000 partitions: one template
topic (``cleanup.policy=compact``, ``remote.storage.enable=true``) written through the engine,
every partition three segments (two rolled), and in each partition directory a remembered
remote version (``local_state.remember``: ``remote-log-metadata.json``) whose tier ends at the
second segment's base, so every partition has one rolled segment to tier; then each other topic
a copy of it. The remote location is an S3 URL on a port nothing listens on: the tick must not
need the bucket (a request would fail the tick), only the partition stats and the remembered
versions.

Every partition gets its key first (as the state sensor leaves them), then ``tiering_sensor``
is evaluated as the daemon evaluates it (``bench_scale.Ticks``) with the state cache cold (a
code server's first tick: within its state-read budget, the rest pending), then, once every
state was read, warm (the steady state, which the goal is for). Its run requests are not
launched.

    .venv/bin/python bench/bench_tiered_sensor.py [--topics 100] [--partitions 100]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import dagster as dg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import RACY_NS, Ticks, report, timed  # noqa: E402  (a sibling script, not a package)

from platform_assets.definitions import build_definitions  # noqa: E402
from platform_assets.defs.partitions import partitions_def_name  # noqa: E402
from platform_assets.defs.resources import LogStore  # noqa: E402
from platform_assets.defs.sensors import current_states  # noqa: E402
from platform_assets.logic.settings import PlatformSettings  # noqa: E402
from platform_assets.logic.state_cache import STATE_CACHE  # noqa: E402
from storage_engine.log.append_validation import ProducerRecord  # noqa: E402
from storage_engine.logdir.manager import LogManager  # noqa: E402
from storage_engine.remote.local_state import remember  # noqa: E402
from storage_engine.remote.version import RemoteSegment, empty_version, release_horizon_ms  # noqa: E402

GOAL_S = 1.0
LOCATION = "s3://bench/tiered"
ENV = {"LOGPLAT_REMOTE_STORAGE": LOCATION, "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "x",
       "AWS_SECRET_ACCESS_KEY": "y", "AWS_REGION": "us-east-1"}
CONFIG = {"cleanup.policy": "compact", "remote.storage.enable": "true", "min.cleanable.dirty.ratio": "0.5"}


def topic_name(i: int) -> str:
    return f"tiered{i:03d}"


def _template(root: Path, partitions: int, now_ms: int) -> None:
    """The first topic through the engine, each partition with a remembered version covering
    its first segment."""
    records = [ProducerRecord(b"k%d" % (j % 3), b"v" * 100, now_ms + j, ()) for j in range(6)]
    name = topic_name(0)
    with LogManager([root]) as manager:
        manager.admin.create_topic(name, partitions, CONFIG)
        for p in range(partitions):
            log = manager.get_log(name, p)
            for _ in range(2):
                log.append(records, now=now_ms)
                log.roll(now=now_ms)
            log.append(records, now=now_ms)
            first, second = (s.base_offset for s in log.segments[:2])
            base = empty_version(name, p, first)
            segment = RemoteSegment(first, second, log.segments[0].size, now_ms, now_ms,
                                    f"{first:020d}-{'0' * 16}.log", f"{first:020d}-{'0' * 16}.index",
                                    f"{first:020d}-{'0' * 16}.timeindex")
            version = base.successor(writer="0" * 16, operation="tier", committed_ms=now_ms,
                                     release_horizon_ms=release_horizon_ms(log.config), summary={},
                                     segments=(segment,), end_offset=second, cleaner_checkpoint=None)
            remember(log.dir, LOCATION, version)
        manager.close_logs(name)


def build_tree(root: Path, topics: int, partitions: int, now_ms: int) -> None:
    _template(root, partitions, now_ms)
    metadata = root / ".logplat-topics"
    template = topic_name(0)
    for i in range(1, topics):
        name = topic_name(i)
        for p in range(partitions):
            shutil.copytree(root / f"{template}-{p}", root / f"{name}-{p}")
        meta = json.loads((metadata / f"{template}.json").read_text())
        meta.update(name=name, topic_id=uuid.uuid4().hex)
        (metadata / f"{name}.json").write_text(json.dumps(meta, indent=2, sort_keys=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--cache", type=Path, default=Path("/dev/shm"), help="where the tree is written (tmpfs)")
    args = parser.parse_args()
    os.environ.update(ENV)
    n = args.topics * args.partitions
    with tempfile.TemporaryDirectory(prefix="bench-tiered-", dir=args.cache) as tmp, \
            tempfile.TemporaryDirectory(prefix="bench-tiered-home-") as home:
        root = Path(tmp) / "logs"
        root.mkdir()
        seconds, _ = timed(build_tree, root, args.topics, args.partitions, int(time.time() * 1000))
        print(f"wrote {n} tiered partitions ({args.topics} topics) with remembered versions in {seconds:.1f} s")
        time.sleep(RACY_NS / 1e9)  # states of directories changed in the last 2 s are not cached
        settings = PlatformSettings(log_dirs=(str(root),), automation="stopped")
        defs = build_definitions(settings)
        with dg.instance_for_test(temp_dir=home) as instance:
            for i in range(args.topics):
                instance.add_dynamic_partitions(partitions_def_name(topic_name(i)),
                                                [str(p) for p in range(args.partitions)])
            ticks = Ticks(defs, settings, instance)
            print(f"tiering_sensor over {n} tiered partitions (no request to the object store):")
            STATE_CACHE.clear()
            tick(ticks, "cold: a code server's first tick, within its state-read budget", None)
            seconds, _ = timed(current_states, LogStore(settings.log_dirs, {}), settings)
            report("every state read once, no budget (what the first ticks share)", seconds, None)
            for i in (1, 2):
                tick(ticks, f"steady tick {i}, cache warm", GOAL_S)


def tick(ticks: Ticks, label: str, goal: float | None) -> None:
    evaluated, _, data = ticks.sensor("tiering_sensor", apply=False)
    requested = sum(len(r.tags["logplat/states"].split(",")) for r in data.run_requests)
    report(label, evaluated, goal, f"{requested} partition(s) requested in {len(data.run_requests)} run(s)"
           if requested else data.skip_message or "")

if __name__ == "__main__":
    main()
