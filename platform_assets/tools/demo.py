"""The main job: the lifecycle of real logs, run and seen through Dagster, end to end.

1. writes a realistic workload through the engine (``workload.py``: a ``compact`` changelog, a
   ``compact,delete`` profile store, a ``delete`` event stream; many segments, duplicates,
   tombstones, expired segments) into ``$LOGPLAT_LOG_DIRS`` (default ``./data/logs``);
   It also writes a tiered topic (``remote.storage.enable``, ``workload.tiered_workload``); unless
   ``LOGPLAT_REMOTE_STORAGE`` names a location, its remote tier is an embedded SeaweedFS (S3)
   started on 127.0.0.1 (``object_store_server.py``, its data in ``$DAGSTER_HOME/seaweedfs``),
   whose environment (``LOGPLAT_REMOTE_STORAGE``, ``AWS_*``) the webserver, daemon, run
   workers and Spark inherit; it is stopped at the end, whatever happens;
2. starts a Dagster webserver and daemon on 127.0.0.1 with ``DAGSTER_HOME`` (default
   ``./dagster_home``) and turns the five sensors on through GraphQL; unless
   ``LOGPLAT_SPARK_MASTER`` names a master or server, also a local Spark Connect server
   (``spark_jobs/runtime/connect_server.py``) that every run worker opens a client session on: one warm
   driver for all runs instead of a JVM started by each (``--no-connect-server``: the latter);
3. waits while the sensors discover the partitions and request tiering, compaction and retention runs,
   and the daemon runs them (each a Spark job through the dagster-pyspark resource, with the
   asset checks), until no partition is due and no run is left;
4. prints a before/after table of every partition (a tiered one with its remote version), with
   what the runs recorded in Dagster, whether the tiered topic reached its remote tier,
   where the runs' time went (their timing tags), and how to open the UI on the same instance.

    python -m platform_assets.tools.demo [--scale 0.5] [--timeout 1200] [--no-connect-server]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from spark_jobs.errors import SparkSetupError
from spark_jobs.runtime.connect_server import free_port, local_connect_server
from spark_jobs.runtime.session import MASTER_ENV
from storage_engine.errors import LogError
from storage_engine.logdir.environment import LOG_DIRS_ENV, log_dirs_from_env
from storage_engine.logdir.manager import LogManager
from storage_engine.remote.access import open_store
from storage_engine.remote.location import ENV_REMOTE_STORAGE
from storage_engine.tools.usage import OneLineParser, UsageError

from ..defs.cleanup import CHECK_READ_SECONDS_TAG, SPARK_JOB_SECONDS_TAG, SPARK_SESSION_SECONDS_TAG
from ..defs.sensors import IN_FLIGHT as RUNS_IN_FLIGHT
from ..logic.log_state import PartitionState, read_states
from ..logic.metadata import effective_checkpoint
from .devserver import DevServer, DevServerError, wait_for
from .instance_setup import SERVERS_BUSY, SERVERS_LOCK_FILE, InstanceSetupError, home_lock, prepare_instance
from .object_store_server import ObjectStoreServerError, seaweedfs
from .preflight import PreflightError, check_environment
from .workload import produce, realistic_workload, tiered_workload

REPO = Path(__file__).resolve().parents[2]  # platform_assets/tools/demo.py -> the repository
SENSORS = ("log_state_sensor", "deleted_files_sensor", "compaction_sensor", "retention_sensor", "tiering_sensor")
IN_FLIGHT = tuple(status.value for status in RUNS_IN_FLIGHT)  # as GraphQL names them


def snapshot(log_dirs: list[str]) -> dict[tuple[str, int], tuple[PartitionState, int]]:
    """Every partition's cheap state and log end offset, read-only."""
    now = int(time.time() * 1000)
    with LogManager(log_dirs, read_only=True) as manager:
        return {s.tp: (s, manager.get_log(s.topic, s.partition).log_end_offset) for s in read_states(manager, now_ms=now)}


def pending_work(log_dirs: list[str]) -> list[str]:
    """Partitions the sensors would still act on."""
    return [f"{s.topic}-{s.partition}" for s, _ in snapshot(log_dirs).values()
            if s.needs_cleaning or (s.tiering is not None and s.tiering.needed)]


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(before: dict, after: dict, recorded: dict[tuple[str, int], dict]) -> str:
    header = ("partition", "policy", "segments", "MB", "log start", "log end", "cleaner checkpoint", "dirty ratio",
              "remote version", "runs", "reclaimed MB", "records compacted away")
    rows = [header]
    for tp in sorted(after):
        a, leo_a = after[tp]
        b, leo_b = before.get(tp, after[tp])
        rec = recorded.get(tp, {})
        policy = ",".join(p for p in ("compact", "delete") if getattr(a, p)) + (" (tiered)" if a.tiering else "")
        rows.append((
            f"{tp[0]}-{tp[1]}", policy, f"{b.segments} -> {a.segments}", f"{_mb(b.size_bytes)} -> {_mb(a.size_bytes)}",
            f"{b.log_start_offset} -> {a.log_start_offset}", f"{leo_b} -> {leo_a}",
            f"{effective_checkpoint(b)} -> {effective_checkpoint(a)}" if a.compact else "-",
            f"{_ratio(b.dirty_ratio)} -> {_ratio(a.dirty_ratio)}" if a.compact else "-",
            f"{b.remote_version or 0} -> {a.remote_version or 0}" if a.tiering is not None else "-",
            str(rec.get("runs", 0)), f"{rec.get('mb_reclaimed', 0):.2f}", str(rec.get("records_removed", 0)),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def recorded_by_dagster(client, topics: list[str], since_ms: float) -> dict[tuple[str, int], dict]:
    """Materializations this job's runs recorded, read back through GraphQL, summed per partition."""
    out: dict[tuple[str, int], dict] = {}
    for topic in topics:
        for m in client.materializations(["logs", topic], limit=1000):
            if float(m["timestamp"]) < since_ms:
                continue
            rec = out.setdefault((topic, int(m["partition"])), {"runs": 0, "mb_reclaimed": 0.0, "records_removed": 0})
            rec["runs"] += 1
            rec["mb_reclaimed"] += m["metadata"].get("mb_reclaimed") or 0.0
            rec["records_removed"] += m["metadata"].get("records_removed") or 0
    return out


def untiered_partitions(after: dict) -> list[str]:
    """Partitions of tiered topics with segments but no remote version yet: the main job shows
    its tiered topic on the remote tier end to end."""
    return [f"{s.topic}-{s.partition}" for s, _ in after.values()
            if s.tiering is not None and s.segments > 1 and not s.remote_version]


def start_object_store(stack: contextlib.ExitStack, dagster_home: Path) -> str:
    """The remote tier of the job: ``LOGPLAT_REMOTE_STORAGE`` as given (proved reachable), or
    an embedded SeaweedFS on 127.0.0.1 whose environment this process and every process it
    starts then carry (``stack`` stops it). Raises ``LogError`` / ``ObjectStoreServerError``."""
    if not os.environ.get(ENV_REMOTE_STORAGE):
        server = stack.enter_context(seaweedfs(dagster_home / "seaweedfs"))
        os.environ.update(server.env())
    return open_store().url  # one LIST: a wrong endpoint, bucket or key stops the job before anything is written


def run_times(runs: list[dict]) -> str:
    """Where the finished runs' time went: each run's wall time (from its start event to its end)
    and, on average, the parts its timing tags record (see ``defs/cleanup.py``)."""
    timed = [r for r in runs if r.get("startTime") and r.get("endTime")]
    if not timed:
        return "no run finished"
    walls = sorted(r["endTime"] - r["startTime"] for r in timed)

    def mean(tag: str) -> float:
        values = [float(r["tags"][tag]) for r in timed if tag in r["tags"]]
        return sum(values) / len(values) if values else 0.0

    return (f"a run took {walls[0]:.1f} to {walls[-1]:.1f} s; on average getting its Spark session "
            f"{mean(SPARK_SESSION_SECONDS_TAG):.1f} s, the cleaning jobs {mean(SPARK_JOB_SECONDS_TAG):.1f} s, "
            f"the checks' reads {mean(CHECK_READ_SECONDS_TAG):.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m platform_assets.tools.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the workload's record counts")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds to wait for the sensors' runs")
    parser.add_argument("--no-connect-server", dest="connect_server", action="store_false",
                        help=f"no Spark Connect server: each run worker starts its own Spark (as when {MASTER_ENV} "
                             "names a master)")
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    # a kill or a closed terminal unwinds like Ctrl-C, so the servers started here are stopped
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: sys.exit(1))
    try:
        with contextlib.ExitStack() as stack:
            return _run(args, stack)
    except KeyboardInterrupt:  # the servers are stopped by then
        print("error: interrupted", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    """The main job's steps; what it starts (the Spark Connect server) is stopped by ``stack``."""
    try:
        log_dirs = [str(p.resolve()) for p in log_dirs_from_env()]
    except LogError as exc:
        print(f"error: {exc}", file=sys.stderr)  # it names the variable
        return 1
    try:  # a bad LOGPLAT_* value (a Spark master that cannot be used) is one line now, not failed runs later
        # the default ./data/logs is made on first use; log dirs the user names must be there (a
        # typo started a new data set, which the UI, pointed at the real one, never showed)
        check_environment(require_log_dirs=bool(os.environ.get(LOG_DIRS_ENV, "").strip()))
    except PreflightError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    dagster_home = Path(os.environ.get("DAGSTER_HOME") or REPO / "dagster_home").resolve()
    print(f"log dirs: {','.join(log_dirs)}\nDAGSTER_HOME: {dagster_home}\n")

    try:  # before the workload is written: a busy or damaged instance stops the job with nothing changed
        if dagster_home.is_dir():  # before the instance is prepared: a running job's must not be touched
            stack.enter_context(home_lock(dagster_home, SERVERS_LOCK_FILE, busy=SERVERS_BUSY.format(home=dagster_home)))
        for action in prepare_instance(dagster_home):  # refuses a DAGSTER_HOME that is not a directory
            print(f"instance: {action}")
    except InstanceSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    logs = dagster_home / "main-job"  # the servers' output of this run only: each run replaces the last
    try:
        if logs.is_symlink() or logs.is_file():
            logs.unlink()
        elif logs.exists():
            shutil.rmtree(logs)
        logs.mkdir()
    except OSError as exc:
        print(f"error: cannot make {logs} for the servers' output: {exc.strerror}", file=sys.stderr)
        return 1
    given = bool(os.environ.get(ENV_REMOTE_STORAGE))
    print(f"the tiered topic's remote tier: {ENV_REMOTE_STORAGE}" if given else
          f"starting an embedded SeaweedFS (S3) on 127.0.0.1 for the tiered topic (its data: {dagster_home / 'seaweedfs'}) ...")
    try:  # before the Spark Connect server and the Dagster servers: they inherit its environment
        print(f"remote storage: {start_object_store(stack, dagster_home)}")
    except (LogError, ObjectStoreServerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    master = os.environ.get(MASTER_ENV, "")
    if args.connect_server and not master:  # before the workload: a server that cannot start changes nothing
        print(f"starting a Spark Connect server for the runs, which warms itself up in the background "
              f"(its output: {logs / 'spark-connect.log'}) ...")
        try:
            master = stack.enter_context(local_connect_server(free_port(), log_path=logs / "spark-connect.log"))
        except SparkSetupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    print(f"Spark for the runs: {master or 'local[*] in each run worker'}")
    env = {"LOGPLAT_LOG_DIRS": ",".join(log_dirs), "LOGPLAT_AUTOMATION": "stopped", "LOGPLAT_SENSOR_INTERVAL_S": "10",
           **({MASTER_ENV: master} if master else {})}
    started = time.time()
    try:
        with LogManager(log_dirs) as manager:
            workload = [*realistic_workload(args.scale), tiered_workload(args.scale)]
            again = sorted({w.name for w in workload} & set(manager.topics()))
            if again:
                print(f"the log dirs already hold {', '.join(again)} (an earlier main job?): this run appends its "
                      "workload to them")
            written = produce(manager, workload, now_ms=int(started * 1000))
    except (LogError, OSError) as exc:
        print(f"error: the workload could not be written: {exc}", file=sys.stderr)
        return 1
    print(f"workload: {sum(w.records for w in written):,} records ({sum(w.tombstones for w in written):,} tombstones, "
          f"{_mb(sum(w.bytes for w in written))} MB) into {len(written)} partitions of "
          f"{len({w.topic for w in written})} topics")
    before = snapshot(log_dirs)
    topics = sorted({tp[0] for tp in before})

    server = DevServer(dagster_home, REPO / "workspace.yaml", logs, env)
    print(f"starting the Dagster webserver and daemon on 127.0.0.1 (their output: {logs}) ...")
    try:
        server.start()
    except DevServerError as exc:
        server.stop()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        client = server.client()
        for name in SENSORS:
            client.set_sensor(name, True)
        print(f"sensors on: {', '.join(SENSORS)}; waiting for their runs (up to {args.timeout:.0f} s) ...")
        t0 = time.monotonic()

        quiet_polls = []

        def settled() -> bool:
            """No run queued or running on three polls in a row (two sensor ticks), after the
            sensors asked for something or when nothing was due. Time retention keeps finding a
            segment that just expired in a workload spread over hours; that is the next tick's work."""
            in_flight = client.runs(statuses=IN_FLIGHT)
            launched = client.runs(created_after=started)
            work = pending_work(log_dirs)
            print(f"  {time.monotonic() - t0:6.0f} s: {len(launched)} run(s) launched, {len(in_flight)} queued or "
                  f"running; due: {', '.join(work) or 'nothing'}", flush=True)
            quiet_polls.append(not in_flight and (bool(launched) or not work))
            return len(quiet_polls) >= 3 and all(quiet_polls[-3:])

        timed_out = False
        try:
            wait_for("the sensors' runs to finish", settled, timeout_s=args.timeout, interval_s=10, on_timeout=server.logs)
        except DevServerError as exc:
            timed_out = True
            print(exc, file=sys.stderr)
        # the sensors stay on: `scripts/ui.sh` (dagster dev) goes on cleaning without a click
        runs = [r for r in client.runs(created_after=started) if r["tags"].get("logplat/trigger")]
        failed = [r["runId"] for r in runs if r["status"] == "FAILURE"]
        failed_ticks = {name: ticks for name in SENSORS if (ticks := client.failed_ticks(name, after=started))}
        recorded = recorded_by_dagster(client, topics, started * 1000 - 1)
    except DevServerError as exc:  # the webserver stopped answering
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop()
    after = snapshot(log_dirs)

    print(f"\n{len(runs)} run(s) launched by the sensors, {len(failed)} failed; {run_times(runs)}; before -> after:\n")
    print(table(before, after, recorded))
    untiered = untiered_partitions(after)
    tiered = sorted(f"{s.topic}-{s.partition} v{s.remote_version}" for s, _ in after.values() if s.remote_version)
    print(f"\non the remote tier ({os.environ[ENV_REMOTE_STORAGE]}): {', '.join(tiered) or 'nothing'}"
          + (f"; not tiered: {', '.join(untiered)}" if untiered else ""))
    ui_env = f"DAGSTER_HOME={dagster_home} LOGPLAT_LOG_DIRS={','.join(log_dirs)}"
    shown = next((t for t in topics if t == "orders.state"), topics[0])
    print(f"\nThe sensors stay on. Open the UI on the same instance (127.0.0.1 only), then "
          f"http://127.0.0.1:3000/assets/logs/{shown}:\n  {ui_env} bash {REPO / 'scripts/ui.sh'}")
    if failed:
        print(f"failed runs: {', '.join(failed)} (see the UI's Runs page)", file=sys.stderr)
    for name, ticks in failed_ticks.items():
        print(f"{name} failed {len(ticks)} tick(s), the last: {ticks[0]} (see the UI's Automation page)",
              file=sys.stderr)
    return 1 if failed or failed_ticks or timed_out or untiered else 0


if __name__ == "__main__":
    sys.exit(main())
