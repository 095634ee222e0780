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
warm-up as before, so it is reported in the server's log and nothing else changes. Past its
deadline it cancels its jobs on the server, which it shares with run workers; killed (it is
stopped with the server) it leaves at once.

    python -m spark_jobs.runtime.warm_up sc://127.0.0.1:15002 [--dir DIR] [--rounds 3]
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from storage_engine.logdir.manager import LogManager
from storage_engine.record import Record
from storage_engine.tools.usage import OneLineParser, UsageError, bounded_int

from ..compaction import compact_partitions
from ..retention import retention_partitions
from .session import build_spark_session, is_remote

TOPIC = "logplat-warm-up"
PARTITIONS = 2
ROUNDS = 3
DEADLINE_S = 300  # a warm-up that takes longer is of no use: the first run worker has come
JOB_TAG = "logplat-warm-up"  # the warm-up's operations on the server, cancelled when it is stopped
_NOW_MS = 1_700_000_000_000


class WarmUpStopped(BaseException):
    """A kill, or the deadline, ended the warm-up (not an ``Exception``: nothing swallows it)."""


def write_log(root: Path) -> list[tuple[str, int]]:
    """A small ``compact,delete`` topic in ``root`` whose partitions both jobs have work in:
    several segments, each of ten keys written twelve times, the oldest segments past retention."""
    with LogManager([root]) as manager:
        manager.admin.create_topic(TOPIC, PARTITIONS, {"cleanup.policy": "compact,delete", "segment.bytes": "2048",
                                                  "retention.ms": "60000", "file.delete.delay.ms": "0"})
        for partition in range(PARTITIONS):
            log = manager.get_log(TOPIC, partition)
            for batch in range(12):
                ts = _NOW_MS - 3_600_000 + batch * 1000
                log.append([Record(0, ts, b"key-%d" % (i % 10), b"v" * 100) for i in range(10)], now=ts)
    return [(TOPIC, p) for p in range(PARTITIONS)]


def warm_up(url: str, rounds: int = ROUNDS, directory: Path | None = None) -> float:
    """Run the compaction and retention jobs ``rounds`` times over a throwaway log (in a new
    directory under ``directory``, default the system's temporary one) through the server at
    ``url``; returns the seconds it took."""
    started = time.monotonic()
    spark = build_spark_session(url)
    spark.addTag(JOB_TAG)
    try:
        for round_ in range(rounds):
            with tempfile.TemporaryDirectory(prefix="logplat-warm-up-", dir=directory) as root:
                partitions = write_log(Path(root))
                now_ms = _NOW_MS + round_
                compact_partitions(spark, [root], partitions, now_ms=now_ms, force=True)
                retention_partitions(spark, [root], partitions, now_ms=now_ms)
    except WarmUpStopped as stop:
        if stop.args[0] == 128 + signal.SIGALRM:  # past the deadline: the server goes on, the run workers come
            with contextlib.suppress(Exception):
                spark.interruptTag(JOB_TAG)
        raise
    return time.monotonic() - started


def _stop(signum: int, _frame: object) -> None:
    raise WarmUpStopped(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m spark_jobs.runtime.warm_up",
                           description="Warm a Spark Connect server for the platform's run workers.")
    parser.add_argument("url", help="the server, sc://host:port (it reads the logs at this host's paths)")
    parser.add_argument("--rounds", type=bounded_int("a number of rounds", 1, 100), default=ROUNDS)
    parser.add_argument("--dir", type=Path, default=None, help="where the throwaway logs go (default: $TMPDIR)")
    try:
        args = parser.parse_args(argv)
        if not is_remote(args.url):
            raise UsageError(f"{parser.prog}: the url must name a Spark Connect server (sc://...), got {args.url!r}")
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, _stop)  # stopped with the server
    signal.signal(signal.SIGALRM, _stop)
    signal.alarm(DEADLINE_S)
    try:
        seconds = warm_up(args.url, args.rounds, args.dir)
    except WarmUpStopped as stop:
        status = stop.args[0]
        print(f"warm-up stopped ({'deadline' if status == 128 + signal.SIGALRM else 'killed'})", file=sys.stderr,
              flush=True)
        # no interpreter teardown: closing the Spark Connect client waits on a server that may be
        # stopping too (it is killed with the server), and hung for the whole grace period
        os._exit(status)
    except Exception as exc:  # best effort: pyspark raises many classes, and any failure costs only time
        print("warm-up failed (the first run worker pays the warm-up instead): " + " ".join(str(exc).split()),
              file=sys.stderr)
        return 1
    finally:
        signal.alarm(0)
    print(f"warm-up: {args.rounds} rounds of the compaction and retention jobs in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
