"""A Spark Connect server on this machine: one long-lived Spark driver that short-lived clients share.

A Dagster run worker is a fresh process per run; with a local master it starts its own JVM
(session start ~7 s and a first job ~2 s on this machine) to clean a few small partitions in a
fraction of a second. Pointed at a Spark Connect server (``LOGPLAT_SPARK_MASTER=sc://host:port``)
it opens a client session instead (under a second, no JVM on its side), and the server's driver,
JIT and executors stay warm from run to run. The jobs run unchanged on either kind of session
(``distribute.run_tasks`` picks the RDD API or ``mapInArrow``); each client session ships the
engine it planned with (``prepare_session``), so a long-lived server never runs stale engine code.
Clients of one engine join one server session and its warm Python workers
(``session.connect_session``), which this server keeps for days of idleness; its Python daemon
(``worker_daemon``) has the workers' heavy imports done before it forks them. Once it listens,
a warm-up client (``warm_up``) runs the jobs on a throwaway log, so that the first run worker
meets a warm server too.

    .venv/bin/python -m spark_jobs.runtime.connect_server --port 15002 --master 'local[*]'
    LOGPLAT_SPARK_MASTER=sc://127.0.0.1:15002 ...   # the platform, logctl --engine spark, the jobs
    .venv/bin/python -m spark_jobs.runtime.connect_server --port 0 -- dagster dev ...   # for as long as it runs

The server is ``spark-submit`` of Spark's own ``SparkConnectServer`` class from the installed
``pyspark`` (no separate Spark distribution), with the jobs' local defaults and this
interpreter for its Python workers. It runs in its own process group, stopped as a whole.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from storage_engine.tools.usage import OneLineParser, UsageError, bounded_int

from ..errors import SparkSetupError
from .session import CONNECT_DEFAULT_PORT as DEFAULT_PORT
from .session import LOCAL_DEFAULTS, MASTER_ENV, before_jvm_start, check_connect_server, check_master
from .warm_up import DEADLINE_S as WARM_UP_DEADLINE_S

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 120.0
LOG_ROLL_BYTES = 8 * 2**20  # a server start writes ~70 KB; ui.sh appends to one log for as long as DAGSTER_HOME lives
SESSION_TIMEOUT = "7d"


def spark_home() -> Path:
    """The installed ``pyspark`` package: its ``bin/spark-submit`` and jars are a Spark home."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def server_command(port: int, master: str) -> list[str]:
    """``spark-submit`` of the Connect server on ``port`` (loopback only) over ``master``."""
    conf = {**LOCAL_DEFAULTS, "spark.connect.grpc.binding.port": str(port),
            "spark.connect.grpc.binding.address": "127.0.0.1",
            # the clients' shared session (``session.connect_session``) outlives idle hours
            "spark.connect.session.manager.defaultSessionTimeout": SESSION_TIMEOUT,
            "spark.python.daemon.module": "spark_jobs.runtime.worker_daemon"}
    args = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", master,
            "--name", "logplat Spark Connect server"]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args + ["spark-internal"]


def free_port() -> int:
    """A loopback TCP port nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        check_connect_server(f"sc://127.0.0.1:{port}", timeout_s=0.5)
    except SparkSetupError:
        return False
    return True


@dataclass
class ConnectServer:
    """A running server (``spark-submit`` in a process group of its own) and its warm-up client
    (``spark_jobs.runtime.warm_up``, in another), which writes its throwaway logs under ``scratch``."""

    process: subprocess.Popen
    url: str
    warm_up_process: subprocess.Popen | None = None
    scratch: Path | None = None

    def wait_warm(self, timeout_s: float = WARM_UP_DEADLINE_S + 30) -> bool:
        """Wait for the warm-up to end (it ends itself at its deadline); whether it ran and succeeded."""
        if self.warm_up_process is None:
            return False
        try:
            return self.warm_up_process.wait(timeout=timeout_s) == 0
        except subprocess.TimeoutExpired:
            return False


def start_server(port: int = DEFAULT_PORT, master: str = "local[*]", log_path: Path | None = None,
                 timeout_s: float = START_TIMEOUT_S, *, warm_up: bool = True) -> ConnectServer:
    """Start the server and wait until it accepts connections, then (``warm_up``) start warming
    it in the background (its output in the log too); :class:`SparkSetupError` when the log
    cannot be written, the port is taken, Java is missing, or the server does not come up (its
    log, when given, says why). A log past ``LOG_ROLL_BYTES`` is first renamed to ``<log>.1``
    (replacing the one before), as log4j's rolling appender would, so it never grows unbounded."""
    check_master(master)
    before_jvm_start()
    if _listening(port):
        raise SparkSetupError(f"port {port} is already in use: stop what listens there or choose another --port")
    if log_path is not None:
        try:
            if log_path.is_file() and log_path.stat().st_size > LOG_ROLL_BYTES:
                os.replace(log_path, log_path.with_name(log_path.name + ".1"))
            open(log_path, "ab").close()
        except OSError as exc:
            raise SparkSetupError(f"cannot write the server's log {log_path}: {exc.strerror or exc}") from None
    env = dict(os.environ, SPARK_HOME=str(spark_home()), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("SPARK_CONF_DIR", None)
    server = ConnectServer(_spawn(server_command(port, master), env, log_path), f"sc://127.0.0.1:{port}")
    deadline = time.monotonic() + timeout_s
    try:
        while not _listening(port):
            if server.process.poll() is not None or time.monotonic() > deadline:
                where = f" (see {log_path})" if log_path is not None else ""
                raise SparkSetupError(f"the Spark Connect server did not start on port {port}{where}")
            time.sleep(0.2)
        if warm_up:
            _start_warm_up(server, env, log_path)
    except BaseException:  # its own process group: Ctrl-C while it starts would not reach it
        stop_server(server)
        raise
    return server


def _start_warm_up(server: ConnectServer, env: dict[str, str], log_path: Path | None) -> None:
    """The warm-up client on the engine this module belongs to (as the run workers import it).
    Its logs go under a directory this process removes once the server is stopped: a job the
    warm-up abandoned when it was stopped may still write there until then."""
    server.scratch = Path(tempfile.mkdtemp(prefix="logplat-warm-up-"))
    path = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")) if p)
    server.warm_up_process = _spawn([sys.executable, "-m", "spark_jobs.runtime.warm_up", server.url, "--dir",
                                     str(server.scratch)], dict(env, PYTHONPATH=path), log_path)
    # reaped as soon as it ends, not left a zombie for as long as the server runs
    threading.Thread(target=server.warm_up_process.wait, name="warm-up reaper", daemon=True).start()


def _spawn(command: list[str], env: dict[str, str], log_path: Path | None) -> subprocess.Popen:
    """``command`` in a process group of its own, its output appended to ``log_path``."""
    log = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    except OSError as exc:
        raise SparkSetupError(f"cannot run {command[0]}: {exc.strerror or exc}") from None
    finally:
        if log_path is not None:
            log.close()


def stop_server(server: ConnectServer) -> None:
    """Stop the warm-up and the server's whole process group (the launcher and its JVM), then
    remove the warm-up's directory. Both are sent SIGTERM before anything is waited for, so an
    interruption of the waits still leaves both stopping; SIGKILL after their grace."""
    running = [(proc, grace_s) for proc, grace_s in ((server.warm_up_process, 15), (server.process, 30))
               if proc is not None]
    for proc, _ in running:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc, grace_s in running:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if server.scratch is not None:
        shutil.rmtree(server.scratch, ignore_errors=True)


@contextlib.contextmanager
def local_connect_server(port: int = DEFAULT_PORT, master: str = "local[*]", log_path: Path | None = None, *,
                         wait_warm: bool = False) -> Iterator[str]:
    """A server for the ``with`` block, warming in the background (or warm, with ``wait_warm``);
    yields its ``sc://`` URL."""
    server = start_server(port, master, log_path)
    try:
        if wait_warm:
            server.wait_warm()
        yield server.url
    finally:
        stop_server(server)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, a kill, a closed terminal


class Stopped(BaseException):
    """A stop signal arrived while the server was starting or serving (a ``BaseException``, as
    ``KeyboardInterrupt``, so that no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, _frame: object) -> None:
    raise Stopped(signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m spark_jobs.runtime.connect_server",
        description="Run a Spark Connect server for the platform's jobs until stopped, or (with a command "
                    f"after --) for as long as that command runs, with {MASTER_ENV} pointing at it.")
    parser.add_argument("--port", type=bounded_int("a port", 0, 65535), default=DEFAULT_PORT,
                        help=f"default {DEFAULT_PORT}; 0 picks a free one")
    parser.add_argument("--master", default="local[*]", help="the server's Spark master (default local[*])")
    parser.add_argument("--log", type=Path, default=None, help="append the server's output to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- and a command to run with the server")
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if command and shutil.which(command[0]) is None:  # before a server is started for nothing
        print(f"error: command not found: {command[0]}", file=sys.stderr)
        return 1
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_stopped)
    try:
        server = start_server(args.port or free_port(), args.master, args.log)
    except SparkSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Stopped as stop:  # start_server has stopped what it started
        return 128 + stop.signum
    try:  # from here on a stop signal, wherever it lands, stops the server
        print(f"Spark Connect server on {server.url} (master {args.master}"
              f"{f'; its output: {args.log}' if args.log else ''}); " +
              (f"{' '.join(command)} runs with {MASTER_ENV}={server.url}" if command else
               f"export {MASTER_ENV}={server.url}; Ctrl-C stops it"), flush=True)
        return _run_with(server, command) if command else _serve(server, args.log)
    except Stopped as stop:  # before the command or the wait took over the signals
        return 128 + stop.signum
    finally:
        for signum in STOP_SIGNALS:  # a second Ctrl-C must not cut the stopping short
            signal.signal(signum, signal.SIG_IGN)
        stop_server(server)


def _serve(server: ConnectServer, log: Path | None) -> int:
    """Until a stop signal, saying when the warm-up is done."""
    try:
        started = time.monotonic()
        warm = server.wait_warm()
        print(f"warmed up in {time.monotonic() - started:.1f} s" if warm else
              "the warm-up did not finish: the first client pays the warm-up" + (f" (see {log})" if log else ""),
              flush=True)
        status = server.process.wait()
    except Stopped:
        return 0
    print(f"error: the Spark Connect server exited by itself with status {status}"
          + (f" (see {log})" if log else ""), file=sys.stderr)
    return 1


#: how long the processes the command started may outlive it (``dagster dev``'s code server and
#: run workers) before they are killed
COMMAND_GROUP_GRACE_S = 10


def _run_with(server: ConnectServer, command: list[str]) -> int:
    """``command`` with the server as its Spark, to its end; its exit status. The command runs in
    a process group of its own, and a stop signal sent to this process (Ctrl-C, a kill, a
    hang-up) is passed on to the whole group: ``dagster dev`` stops its webserver and daemon on
    SIGTERM, but not its code server and run workers, which a kill of ``scripts/ui.sh`` left
    running with no parent, on a Spark server that was gone. Whatever of the group outlives the
    command is ended (``_end_group``)."""
    child: subprocess.Popen | None = None
    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if child is None:
            pending.append(signum)
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signum)

    for signum in STOP_SIGNALS:  # caught, not ignored: the command starts with the default handling
        signal.signal(signum, forward)
    try:
        child = subprocess.Popen(command, env=dict(os.environ, **{MASTER_ENV: server.url}), start_new_session=True)
    except OSError as exc:
        print(f"error: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        for signum in pending:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signum)
        status = child.wait()
    finally:
        _end_group(child.pid, COMMAND_GROUP_GRACE_S)
    return status if status >= 0 else 128 - status


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (from ``/proc``: a zombie waiting for its
    reaper does not count, and ``kill(-pgid, 0)``, the answer without ``/proc``, counts it)."""
    if not Path("/proc/self/stat").exists():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # ended meanwhile
        state, _ppid, group = text[text.rindex(")") + 2:].split()[:3]
        if state != "Z" and int(group) == pgid:
            return True
    return False


def _end_group(pgid: int, grace_s: float) -> None:
    """End what is left of a process group once its leader has ended: SIGTERM, then SIGKILL
    after ``grace_s``."""
    if not _group_alive(pgid):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _group_alive(pgid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
