"""Warm a new Spark Connect server before the platform's first run worker meets it.

A brand-new server's first client pays the warm-up of everything its jobs touch: the server
loads the session and artifact classes (its session took ~3 s instead of ~0.6 s), its Python
daemon starts and imports pandas and pyarrow (``worker_daemon``), and the JIT has compiled
nothing of ``mapInArrow`` yet (the first small job took ~5 s instead of ~0.4 s). Measured with
``bench/bench_dagster_run.py --connect``, the server's first run worker spent ~8.5 s more than a
later one. ``connect_server.start_server`` therefore runs this right after the server listens,
in a process of its own: a client of the engine's shared session (``session.connect_session``,
the one every run worker joins, so its Python workers are the ones warmed) cleans and applies
retention to a small log of its own, in a temporary directory removed afterwards, a few times
over. It writes nothing anywhere else, and a failure only means the first real client pays the
warm-up as before, so it is reported in the server's log and nothing else changes.

    python -m spark_jobs.warm_up sc://127.0.0.1:15002
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from storage_engine.manager import LogManager
from storage_engine.record import Record

from .compaction import compact_partitions
from .retention import retention_partitions
from .session import build_spark_session

TOPIC = "logplat-warm-up"
PARTITIONS = 2
ROUNDS = 3
_NOW_MS = 1_700_000_000_000


def write_log(root: Path) -> list[tuple[str, int]]:
    """A small ``compact,delete`` topic in ``root`` whose partitions both jobs have work in:
    several segments, every key written twice, the oldest segments past retention."""
    with LogManager([root]) as manager:
        manager.create_topic(TOPIC, PARTITIONS, {"cleanup.policy": "compact,delete", "segment.bytes": "2048",
                                                  "retention.ms": "60000", "file.delete.delay.ms": "0"})
        for partition in range(PARTITIONS):
            log = manager.get_log(TOPIC, partition)
            for batch in range(12):
                ts = _NOW_MS - 3_600_000 + batch * 1000
                log.append([Record(0, ts, b"key-%d" % (i % 10), b"v" * 100) for i in range(10)], now=ts)
    return [(TOPIC, p) for p in range(PARTITIONS)]


def warm_up(url: str, rounds: int = ROUNDS) -> float:
    """Run the compaction and retention jobs ``rounds`` times over a throwaway log through the
    server at ``url``; returns the seconds it took."""
    started = time.monotonic()
    spark = build_spark_session(url)
    for round_ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="logplat-warm-up-") as directory:
            partitions = write_log(Path(directory))
            now_ms = _NOW_MS + round_
            compact_partitions(spark, [directory], partitions, now_ms=now_ms, force=True)
            retention_partitions(spark, [directory], partitions, now_ms=now_ms)
    return time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Warm a Spark Connect server for the platform's run workers.")
    parser.add_argument("url", help="the server, sc://host:port")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    # stopped with the server: unwind, so the temporary log is removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        seconds = warm_up(args.url, args.rounds)
    except Exception as exc:  # best effort: pyspark raises many classes, and any failure costs only time
        print(f"warm-up failed (the first run worker pays the warm-up instead): {exc}", file=sys.stderr)
        return 1
    print(f"warm-up: {args.rounds} rounds of the compaction and retention jobs in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
