"""The Spark jobs through a REAL Spark Connect server (``spark_jobs.runtime.connect_server``), against the
engine's local cleaner and retention, byte for byte, and a Dagster run whose ``pyspark``
resource is a Spark Connect client.

A Spark Connect client marks its whole process as one (``SPARK_CONNECT_MODE_ENABLED``), and this
test run already holds a classic session (the ``spark`` fixture), so each client here is a
separate Python process that prints its results as JSON. The server outlives both clients, as it
outlives Dagster's run workers: the second client finds a warm server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from platform_assets.logic.check_outcomes import KEYS_UNIQUE, LATEST_VALUES
from spark_jobs.errors import SparkSetupError
from spark_jobs.runtime import connect_server, session
from spark_jobs.runtime.connect_server import free_port, local_connect_server, start_server, stop_server
from spark_jobs.runtime.session import (
    QUIET_LOG4J,
    check_java,
    driver_logging,
    engine_fingerprint,
    session_config,
    shared_session_id,
    with_session_id,
)
from storage_engine.logdir.manager import LogManager
from storage_engine.outcomes import COMPACTED, DELETED, NOTHING, SKIPPED
from tests.helpers.cleaner import NOW
from tests.helpers.paths import REPO
from tests.spark.test_cluster import RETENTION_NOW, local_compaction
from tests.spark.test_compaction import REPORT_FIELDS, assert_same_dirs, checkpoint_of, random_topic, retention_topic

CLIENT_TIMEOUT_S = 240

# Compaction (whole partitions, then split ones), retention, a read through the data source.
JOBS_CLIENT = textwrap.dedent("""
    import json, sys
    from spark_jobs.compaction import compact_partitions
    from spark_jobs.distribute import task_slots
    from spark_jobs.retention import retention_partitions
    from spark_jobs.runtime.session import build_spark_session, is_connect

    url, log_dir, now, retention_now = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    spark = build_spark_session(url)
    out = {"connect": is_connect(spark), "slots": task_slots(spark), "compaction": []}
    for split_bytes in (None, 0):
        result = compact_partitions(spark, [log_dir], [("cc", 0), ("cc", 1)], now_ms=now, force=True,
                                    split_bytes=split_bytes)
        out["compaction"].append([o.to_dict() | {"topic": o.topic, "partition": o.partition} for o in result.outcomes])
        now += 10**10  # the second round removes the tombstones past their horizon
    out["retention"] = [o.to_dict() for o in retention_partitions(spark, [log_dir], now_ms=retention_now).outcomes]
    out["rows"] = spark.read.format("kafka-log").option("topics", "cc").load(log_dir).count()
    out["executor_engine"] = [getattr(spark.range(1).mapInArrow(
        lambda batches: (__import__("pyarrow").RecordBatch.from_pydict({"f": [__import__(module).__file__]})
                         for _ in batches), "f string").collect()[0], "f")
        for module in ("storage_engine", "spark_jobs")]
    print("RESULT " + json.dumps(out), flush=True)
""")


def run_client(tmp_path: Path, code: str, args: list[str], env: dict[str, str] | None = None) -> dict:
    script = tmp_path / f"client-{len(list(tmp_path.glob('client-*')))}.py"
    script.write_text(code)
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=CLIENT_TIMEOUT_S)
    stderr_tail = "\n".join(proc.stderr.splitlines()[-40:])
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"client exited with {proc.returncode}:\n{stderr_tail}"
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    try:
        check_java()
    except SparkSetupError as exc:
        pytest.skip(f"no usable Java for a Spark Connect server: {exc}")
    log = tmp_path_factory.mktemp("connect") / "server.log"
    with local_connect_server(free_port(), "local[2]", log, wait_warm=True) as url:
        yield url


@pytest.mark.slow
def test_jobs_through_spark_connect_equal_the_local_engine_byte_for_byte(spark, tmp_path, connect_url):
    local, remote = tmp_path / "local", tmp_path / "connect"
    random_topic(local, "cc", seed=7, partitions=2)
    retention_topic(local, "ret", 8)
    shutil.copytree(local, remote)

    got = run_client(tmp_path, JOBS_CLIENT, [connect_url, str(remote), str(NOW), str(RETENTION_NOW)])
    assert got["connect"] and got["slots"] == 2
    # the server's Python workers ran the engine this client shipped, not the repository's files
    # (its daemon, spark_jobs.runtime.worker_daemon, forgets the spark_jobs package it was found in)
    assert all(".zip" in path for path in got["executor_engine"]), got["executor_engine"]

    for i, outcomes in enumerate(got["compaction"]):  # whole partitions, then split ones
        expected = local_compaction(local, "cc", 2, NOW + i * 10**10)
        assert {(o["topic"], o["partition"]) for o in outcomes} == set(expected)
        for o in outcomes:
            rep = expected[(o["topic"], o["partition"])]
            if rep["skipped"] is not None:
                assert o["status"] == SKIPPED, o
                continue
            assert o["status"] == COMPACTED, o["reason"]
            assert {f: o[f] for f in REPORT_FIELDS} == {f: rep[f] for f in REPORT_FIELDS}, (i, o["partition"])
    assert [o["status"] for o in got["compaction"][0]] == [COMPACTED, COMPACTED]
    with LogManager([local]) as m:
        applied = {(r.plan.topic, r.plan.partition): r for r in m.retention.apply(
            m.retention.plans(now_ms=RETENTION_NOW), now_ms=RETENTION_NOW)}
    assert any(r.deleted_segments for r in applied.values())
    for o in got["retention"]:
        r = applied.get((o["topic"], o["partition"]))
        assert o["status"] == (DELETED if r is not None and r.deleted_segments else NOTHING)
    assert got["rows"] == spark.read.format("kafka-log").option("topics", "cc").load(str(local)).count() > 0
    assert_same_dirs(local, remote)


DAGSTER_CLIENT = textwrap.dedent("""
    import json, sys
    import dagster as dg
    from platform_assets.definitions import build_definitions
    from platform_assets.defs.partitions import topic_partitions_def
    from platform_assets.logic.settings import PlatformSettings

    url, log_dir = sys.argv[1], sys.argv[2]
    with dg.instance_for_test() as instance:
        defs = build_definitions(PlatformSettings(log_dirs=(log_dir,), automation="stopped", spark_master=url))
        job = next(j for j in defs.jobs if j.name.startswith("cleanup"))
        instance.add_dynamic_partitions(topic_partitions_def("cc").name, ["0", "1"])
        result = defs.resolve_job_def(job.name).execute_in_process(
            instance=instance, tags={"dagster/asset_partition_range_start": "0",
                                     "dagster/asset_partition_range_end": "1"}, raise_on_error=False)
        checks = [(e.asset_check_evaluation_data.check_name, e.asset_check_evaluation_data.passed)
                  for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
        from pyspark.sql.utils import is_remote
        print("RESULT " + json.dumps({"success": result.success, "checks": checks, "remote": is_remote()}), flush=True)
""")


@pytest.mark.slow
def test_a_dagster_run_cleans_through_a_spark_connect_server(tmp_path, connect_url):
    """The platform's ``pyspark`` resource pointed at the server: the run's cleaning and its
    checks' reads are Spark Connect jobs, and every check passes."""
    random_topic(tmp_path / "logs", "cc", seed=7, partitions=2)
    assert checkpoint_of(tmp_path / "logs" / "cleaner-offset-checkpoint") == {}
    got = run_client(tmp_path, DAGSTER_CLIENT, [connect_url, str(tmp_path / "logs")])
    assert got["success"] and got["remote"]
    # the checks that compare the log with what was read before the run, for both partitions
    assert {name for name, _ in got["checks"]} >= {LATEST_VALUES, KEYS_UNIQUE}
    assert got["checks"] and all(passed for _, passed in got["checks"]), got["checks"]
    cleaned = checkpoint_of(tmp_path / "logs" / "cleaner-offset-checkpoint")
    assert set(cleaned) == {("cc", 0), ("cc", 1)}, cleaned


# One client (a run worker): the session it joined and the Python workers that ran its jobs.
SESSION_CLIENT = textwrap.dedent("""
    import json, os, sys
    from spark_jobs.distribute import run_tasks
    from spark_jobs.runtime.session import build_spark_session, connect_session

    url, mode = sys.argv[1], sys.argv[2]
    conf = {"spark.sql.shuffle.partitions": "7"} if mode == "own-settings" else None
    spark = build_spark_session(url, conf=conf)
    assert connect_session(url, conf) is spark  # one client per process, URL and settings
    workers = run_tasks(spark, [[0], [1]], lambda items: [(os.getpid(), os.getppid())])
    print("RESULT " + json.dumps({"session": spark.client._session_id, "daemons": sorted({w[1] for w in workers})}),
          flush=True)
    if mode == "release":  # as a client outside the platform may do: the server ends the session for good
        spark.release_session_on_close = True
        spark.stop()
""")


@pytest.mark.slow
def test_clients_of_one_engine_share_a_session_and_its_warm_python_workers(tmp_path, connect_url):
    """Each run worker is a new process: sharing the server session of its engine means its jobs
    meet the Python workers earlier clients started (one daemon, not one per client), and a
    session the server has ended is stepped over to the next generation's."""
    first = run_client(tmp_path, SESSION_CLIENT, [connect_url, "keep"])
    second = run_client(tmp_path, SESSION_CLIENT, [connect_url, "release"])
    assert second["session"] == first["session"]
    assert second["daemons"] == first["daemons"] and len(first["daemons"]) == 1
    fingerprint = engine_fingerprint()
    generation = [shared_session_id(fingerprint, g) for g in range(64)].index(first["session"])

    after_release = run_client(tmp_path, SESSION_CLIENT, [connect_url, "keep"])
    assert after_release["session"] == shared_session_id(fingerprint, generation + 1)
    assert after_release["daemons"] != first["daemons"]  # a new session starts its own workers

    # settings are the session's, so a client asking for others does not share (nor change) it
    own = run_client(tmp_path, SESSION_CLIENT, [connect_url, "own-settings"])
    assert own["session"] not in {shared_session_id(fingerprint, g) for g in range(64)}


def _process_tree(root: int) -> dict[int, tuple[int, str]]:
    """``root``'s descendants now: pid -> (parent pid, command line)."""
    processes = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                processes[int(entry.name)] = parent, (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, IndexError, ValueError):  # gone meanwhile
                continue
    tree, grown = {root}, True
    while grown:
        added = {pid for pid, (parent, _) in processes.items() if parent in tree} - tree
        tree |= added
        grown = bool(added)
    return {pid: processes[pid] for pid in tree - {root}}


def _servers_on(port: int) -> list[str]:
    """The command lines of a server on ``port`` and of its warm-up, while any runs."""
    return [cmd for _, cmd in _process_tree(1).values()
            if f"spark.connect.grpc.binding.port={port}" in cmd or f"spark_jobs.runtime.warm_up sc://127.0.0.1:{port}" in cmd]


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie no longer does)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.slow
def test_a_new_servers_warm_up_starts_the_workers_its_first_client_meets(tmp_path, monkeypatch):
    """Right after it listens the server is warmed by a client of the engine's shared session,
    which cleans throwaway logs: killed half-way it says so in its status; run to the end, it
    leaves the session's Python daemon running, and a run worker's first jobs are forked from it
    instead of starting one (and the JIT) themselves. Nothing of either warm-up, nor of the
    client's engine zip, is left once the server is stopped."""
    try:
        check_java()
    except SparkSetupError as exc:
        pytest.skip(f"no usable Java for a Spark Connect server: {exc}")
    scratch = tmp_path / "tmp"  # the temporary directory of the server's warm-up and of the client
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    log = tmp_path / "server.log"
    server = start_server(free_port(), "local[1]", log)
    try:
        assert server.scratch is not None and server.scratch.parent == scratch
        deadline = time.monotonic() + 120
        while not list(server.scratch.iterdir()):
            assert server.warm_up_process.poll() is None and time.monotonic() < deadline, "the warm-up wrote no log"
            time.sleep(0.05)
        os.killpg(server.warm_up_process.pid, signal.SIGTERM)
        assert server.warm_up_process.wait(timeout=30) == 128 + signal.SIGTERM

        by_hand = tmp_path / "by-hand"
        by_hand.mkdir()
        warm = subprocess.run([sys.executable, "-m", "spark_jobs.runtime.warm_up", server.url, "--dir", str(by_hand)],
                              capture_output=True, text=True, cwd=REPO, timeout=CLIENT_TIMEOUT_S)
        assert warm.returncode == 0, warm.stderr[-3000:]
        assert warm.stdout.startswith("warm-up: 3 rounds of the compaction and retention jobs in ")
        assert list(by_hand.iterdir()) == []
        forked = {pid: parent for pid, (parent, cmd) in _process_tree(server.process.pid).items()
                  if "spark_jobs.runtime.worker_daemon" in cmd}  # the daemon and the workers it forked
        daemons = [pid for pid, parent in forked.items() if parent not in forked]
        assert len(daemons) == 1

        first_client = run_client(tmp_path, SESSION_CLIENT, [server.url, "keep"])
        assert first_client["daemons"] == daemons
        processes = _process_tree(server.process.pid)
    finally:
        stop_server(server)
    assert list(scratch.iterdir()) == []
    deadline = time.monotonic() + 60  # the Python daemon and its workers end once the JVM has gone
    while (left := {pid: cmd for pid, (_, cmd) in processes.items() if _alive(pid)}) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes and not left, left


def test_the_servers_python_daemon_preloads_without_starting_a_thread():
    """It forks workers: a thread alive at a fork (pandas and pyarrow start some on import) can
    leave a lock held forever in the child."""
    code = ("import os; from spark_jobs.runtime.worker_daemon import PRELOADED, preload; preload(); import sys; "
            "print(len(os.listdir('/proc/self/task')), all(m in sys.modules for m in PRELOADED))")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                          "JE_ARROW_MALLOC_CONF")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "True"]


def test_the_engine_zip_is_the_same_bytes_for_the_same_source(tmp_path, monkeypatch):
    """Clients of a shared session each add the zip again, and the server refuses a different
    one under the same name: file times (another clone, a checkout) must not change it."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("A = 1\n")
    files = [("storage_engine/a.py", src / "a.py")]
    monkeypatch.setattr(session, "_engine_files", lambda: iter(files))
    for name in ("one", "two", "three"):
        (tmp_path / name).mkdir()
    first = session.engine_zip(tmp_path / "one").read_bytes()
    os.utime(src / "a.py", (1_000_000_000, 1_000_000_000))
    assert session.engine_zip(tmp_path / "two").read_bytes() == first
    (src / "a.py").write_text("A = 2\n")
    assert session.engine_zip(tmp_path / "three").read_bytes() != first


def test_the_shared_session_id_names_the_engine_and_generation():
    ids = {shared_session_id(f, g) for f in ("a" * 64, "b" * 64) for g in (0, 1)}
    assert len(ids) == 4 and shared_session_id("a" * 64, 0) == shared_session_id("a" * 64, 0)
    assert all(uuid.UUID(i).version == 4 for i in ids)  # the server takes only UUIDs
    assert with_session_id("sc://h:1", "x") == "sc://h:1/;session_id=x"
    assert with_session_id("sc://h:1/;use_ssl=true", "x") == "sc://h:1/;use_ssl=true;session_id=x"


def test_a_spark_connect_url_sets_only_session_settings():
    remote = session_config("sc://127.0.0.1:15002")
    assert remote["spark.remote"] == "sc://127.0.0.1:15002" and "spark.master" not in remote
    assert "spark.driver.memory" not in remote  # the server's, not a client's to set
    local = session_config("local[2]", {"spark.driver.memory": "1g"})
    assert local["spark.master"] == "local[2]" and local["spark.driver.memory"] == "1g"
    assert "spark.remote" not in local


def test_a_busy_port_is_refused_in_one_line_before_any_server_starts(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(SparkSetupError, match=f"port {port} is already in use"):
            start_server(port, "local[1]", tmp_path / "server.log")
        proc = subprocess.run([sys.executable, "-m", "spark_jobs.runtime.connect_server", "--port", str(port)],
                              capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [f"error: port {port} is already in use: stop what listens there "
                                                f"or choose another --port"]
    assert not (tmp_path / "server.log").exists()


@pytest.mark.slow
def test_a_server_that_lives_as_long_as_a_command(tmp_path):
    """``scripts/ui.sh`` runs ``dagster dev`` this way: the command gets the server's URL, its exit
    status is the wrapper's, and the server (its warm-up, its JVM) is gone when it ends."""
    try:
        check_java()
    except SparkSetupError as exc:
        pytest.skip(f"no usable Java for a Spark Connect server: {exc}")
    command = ("import os, sys; from spark_jobs.runtime.session import check_connect_server; "
               "url = os.environ['LOGPLAT_SPARK_MASTER']; check_connect_server(url); print('CHILD', url); sys.exit(3)")
    # a log past its limit rolls over to server.log.1 before the server writes
    old_output = b"an earlier start\n" * (connect_server.LOG_ROLL_BYTES // 17 + 1)
    (tmp_path / "server.log").write_bytes(old_output)
    (tmp_path / "server.log.1").write_bytes(b"the oldest start\n")
    proc = subprocess.run([sys.executable, "-m", "spark_jobs.runtime.connect_server", "--port", "0", "--master", "local[1]",
                           "--log", str(tmp_path / "server.log"), "--", sys.executable, "-c", command],
                          capture_output=True, text=True, cwd=REPO, timeout=CLIENT_TIMEOUT_S)
    assert proc.returncode == 3, proc.stderr[-3000:]
    announced, child = proc.stdout.splitlines()
    url = child.split()[1]
    assert announced.startswith(f"Spark Connect server on {url} (master local[1]; its output: ")
    assert announced.endswith(f" runs with LOGPLAT_SPARK_MASTER={url}")
    assert _servers_on(int(url.rsplit(":", 1)[1])) == []
    assert (tmp_path / "server.log.1").read_bytes() == old_output
    assert b"SparkConnectServer" in (tmp_path / "server.log").read_bytes()
    assert (tmp_path / "server.log").stat().st_size < connect_server.LOG_ROLL_BYTES
    with pytest.raises(SparkSetupError, match="no Spark Connect server answers"):
        session.check_connect_server(url, timeout_s=1)

    missing = subprocess.run([sys.executable, "-m", "spark_jobs.runtime.connect_server", "--port", "0", "--",
                              "no-such-command-here"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.splitlines() == ["error: command not found: no-such-command-here"]


def _running(pid: int) -> bool:
    """Whether the process runs (a zombie left for its reaper does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_a_kill_stops_the_server_while_it_starts_and_is_passed_on_to_the_command(tmp_path):
    """A kill while the JVM starts leaves nothing running and prints no traceback; a kill while
    the command runs goes to the command, whose status the wrapper returns, and then the server
    is stopped."""
    try:
        check_java()
    except SparkSetupError as exc:
        pytest.skip(f"no usable Java for a Spark Connect server: {exc}")
    port = free_port()
    starting = subprocess.Popen([sys.executable, "-m", "spark_jobs.runtime.connect_server", "--port", str(port),
                                 "--master", "local[1]"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=REPO)
    deadline = time.monotonic() + 60
    while not _servers_on(port):  # the JVM is on its way, not yet listening
        assert time.monotonic() < deadline and starting.poll() is None
        time.sleep(0.05)
    starting.send_signal(signal.SIGTERM)
    out, err = starting.communicate(timeout=120)
    assert starting.returncode == 128 + signal.SIGTERM and out == "" and err == ""
    assert _servers_on(port) == []

    # the command starts processes of its own, as dagster dev starts a code server and run
    # workers, which a kill of scripts/ui.sh left running: one ends on SIGTERM, one ignores it
    port = free_port()
    command = ("import subprocess, sys, time; "
               "kids = [subprocess.Popen(['sleep', '600']), subprocess.Popen([sys.executable, '-c', "
               "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); "
               "time.sleep(600)'], stdout=subprocess.PIPE)]; "
               "kids[1].stdout.readline(); "  # its handler is set
               "print('READY', *(k.pid for k in kids), flush=True); time.sleep(600)")
    running = subprocess.Popen([sys.executable, "-m", "spark_jobs.runtime.connect_server", "--port", str(port), "--master",
                                "local[1]", "--", sys.executable, "-c", command], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO)
    assert running.stdout.readline().startswith(f"Spark Connect server on sc://127.0.0.1:{port} ")
    ready, *kids = running.stdout.readline().split()
    assert ready == "READY" and len(kids) == 2
    running.send_signal(signal.SIGTERM)
    out, err = running.communicate(timeout=120)
    assert running.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err[-3000:]
    assert _servers_on(port) == []
    assert [pid for pid in map(int, kids) if _running(pid)] == []


@pytest.mark.parametrize("args, error", [
    (["spark_jobs.runtime.connect_server", "--port", "abc"], "argument --port: a port must be an integer, got 'abc'"),
    (["spark_jobs.runtime.connect_server", "--port", "70000"], "argument --port: a port must be between 0 and 65535, got 70000"),
    (["spark_jobs.runtime.connect_server", "--port", "0", "--log", "{tmp}/no-such-dir/server.log"],
     "cannot write the server's log {tmp}/no-such-dir/server.log: No such file or directory"),
    (["spark_jobs.runtime.warm_up", "local[2]"], "the url must name a Spark Connect server (sc://...), got 'local[2]'"),
    (["spark_jobs.runtime.warm_up", "sc://127.0.0.1:1", "--rounds", "0"],
     "argument --rounds: a number of rounds must be between 1 and 100, got 0"),
])
def test_bad_usage_of_the_server_and_its_warm_up_is_one_line(tmp_path, args, error):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    line, = proc.stderr.splitlines()
    assert line.startswith("error: ") and line.endswith(error.replace("{tmp}", str(tmp_path)))
    assert list(tmp_path.iterdir()) == []


def test_a_partition_that_is_not_there_is_refused_before_any_jvm_starts(tmp_path):
    """``compact --engine spark --partition 9`` started Spark (its log lines on stderr, seconds)
    before saying the partition does not exist."""
    random_topic(tmp_path / "logs", "cc", seed=7)
    proc = subprocess.run([sys.executable, "-m", "spark_jobs.cli", "--log-dirs", str(tmp_path / "logs"),
                           "compact", "--engine", "spark", "--topic", "cc", "--partition", "9"],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "LOGPLAT_SPARK_MASTER": "local[1]"})
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"error: partition cc-9 does not exist in {tmp_path / 'logs'}"], proc.stderr


def test_a_spark_command_prints_its_own_lines_not_sparks_start_up_chatter(tmp_path):
    """``--engine spark`` commands that start a local JVM printed Spark's log4j profile, its
    shell banner and its WARN lines on stderr. Java's own notice about the incubator module
    Spark loads is printed by the JVM before any logging starts, so it remains."""
    random_topic(tmp_path / "logs", "cc", seed=7)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR", "SPARK_HOME")}
    proc = subprocess.run([sys.executable, "-m", "spark_jobs.cli", "--log-dirs", str(tmp_path / "logs"),
                           "retention", "--engine", "spark", "--dry-run"],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**env, "LOGPLAT_SPARK_MASTER": "local[1]"})
    assert proc.returncode == 0, proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if "jdk.incubator.vector" not in ln] == [], proc.stderr


def test_a_spark_its_user_configured_keeps_its_own_logging(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    assert driver_logging() == {"spark.driver.defaultJavaOptions": f'"-Dlog4j2.configurationFile={QUIET_LOG4J}"'}
    assert QUIET_LOG4J.is_file()
    assert session_config("local[1]")["spark.driver.defaultJavaOptions"] == driver_logging()[
        "spark.driver.defaultJavaOptions"]
    assert "spark.driver.defaultJavaOptions" not in session_config("sc://127.0.0.1:1")  # the server's own
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert driver_logging() != {}  # a Spark home without a conf folder: pip's pyspark, say
    (tmp_path / "conf").mkdir()
    assert driver_logging() == {}
    monkeypatch.delenv("SPARK_HOME")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    assert driver_logging() == {}


@pytest.mark.parametrize("env, error", [
    ({"LOGPLAT_SPARK_MASTER": "sc://127.0.0.1:{port}"},
     "no Spark Connect server answers at sc://127.0.0.1:{port}: Connection refused"),
    ({"LOGPLAT_SPARK_MASTER": "spark://127.0.0.1:{port}"},
     "no Spark master answers at spark://127.0.0.1:{port}: Connection refused"),
    ({"LOGPLAT_SPARK_MASTER": "bogus"}, "not a Spark master: 'bogus' (local[N], spark://host:port, yarn, k8s://..., "
                                        "or sc://host:port for a Spark Connect server)"),
    ({"LOGPLAT_SPARK_MASTER": "local[0]"}, "not a Spark master: 'local[0]': its thread and worker counts must be 1 to "
                                           "2147483647 (a failure count 0 to 2147483647)"),
    ({"LOGPLAT_SPARK_MASTER": "local[4, 99999999999]"}, "not a Spark master: 'local[4, 99999999999]': its thread and "
                                                        "worker counts must be 1 to 2147483647 (a failure count 0 to "
                                                        "2147483647)"),
    ({"LOGPLAT_SPARK_MASTER": "yarn"},
     "the master 'yarn' needs HADOOP_CONF_DIR or YARN_CONF_DIR set to the cluster's configuration directory"),
    ({"LOGPLAT_SPARK_MASTER": "k8s://127.0.0.1:{port}"},
     "no Kubernetes API server answers at k8s://127.0.0.1:{port}: Connection refused"),
    ({"LOGPLAT_SPARK_MASTER": "k8s://ftp://127.0.0.1"},
     "not a Spark master: 'k8s://ftp://127.0.0.1': a Kubernetes master's scheme is http or https, not ftp"),
    ({"LOGPLAT_SPARK_MASTER": "local-cluster[1,1,512]"},
     "not a Spark master: 'local-cluster[1,1,512]': a local-cluster worker's memory must hold an executor's 1024 MiB"),
], ids=["connect", "standalone", "not-a-master", "no-threads", "too-many-failures", "yarn-without-its-conf",
        "k8s-unanswered", "k8s-scheme", "local-cluster-memory"])
def test_no_server_at_the_url_is_a_one_line_error_not_minutes_of_retries(tmp_path, env, error):
    """Checked before any JVM starts, naming the variable and its value: Spark would print pages
    of Java, a standalone master after a minute of retries, and a Connect client retries for
    minutes."""
    port = free_port()  # nothing listens there
    env = {k: v.format(port=port) for k, v in env.items()}
    _assert_refused_before_a_jvm(tmp_path, env, f"{' '.join(f'{k}={v}' for k, v in env.items())}: "
                                                f"{error.format(port=port)}")


def test_a_log_level_spark_refuses_is_a_one_line_error_before_a_jvm_starts(tmp_path):
    """``setLogLevel`` refused it once the session was up: a traceback from every command."""
    _assert_refused_before_a_jvm(tmp_path, {"LOGPLAT_SPARK_LOG_LEVEL": "bogus"},
                                 "LOGPLAT_SPARK_LOG_LEVEL=bogus: not a Spark log level (one of ALL, DEBUG, ERROR, "
                                 "FATAL, INFO, OFF, TRACE, WARN)")


def _assert_refused_before_a_jvm(tmp_path: Path, env: dict[str, str], error: str) -> None:
    """``logctl compact --engine spark`` under ``env`` exits 1 with the one line ``error``, fast,
    with no Java started under it (a ``java`` first on PATH that leaves a mark) and nothing changed."""
    shim = tmp_path / "bin" / "java"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\ntouch {tmp_path / 'java-ran'}\nexit 1\n")
    shim.chmod(0o755)
    random_topic(tmp_path / "logs", "cc", seed=7)
    before = sorted(p.name for p in (tmp_path / "logs" / "cc-0").iterdir())
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "spark_jobs.cli", "--log-dirs", str(tmp_path / "logs"),
                           "compact", "--engine", "spark", "--topic", "cc"],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**{k: v for k, v in os.environ.items()
                                  if k not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "JAVA_HOME")},
                               **env, "PATH": f"{shim.parent}:{os.environ['PATH']}"})
    assert time.monotonic() - started < 60
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: {error}"]
    assert not (tmp_path / "java-ran").exists()
    assert sorted(p.name for p in (tmp_path / "logs" / "cc-0").iterdir()) == before
