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

    .venv/bin/python -m spark_jobs.connect_server --port 15002 --master 'local[*]'
    LOGPLAT_SPARK_MASTER=sc://127.0.0.1:15002 ...   # the platform, logctl --engine spark, the jobs
    .venv/bin/python -m spark_jobs.connect_server --port 0 -- dagster dev ...   # for as long as it runs

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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from .errors import SparkSetupError
from .session import CONNECT_DEFAULT_PORT as DEFAULT_PORT
from .session import LOCAL_DEFAULTS, MASTER_ENV, before_jvm_start, check_connect_server

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 120.0
SESSION_TIMEOUT = "7d"
WARM_UP_TIMEOUT_S = 300.0


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
            "spark.python.daemon.module": "spark_jobs.worker_daemon"}
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
    """A running server (``spark-submit`` in a process group of its own) and its warm-up."""

    process: subprocess.Popen
    url: str
    warm_up: subprocess.Popen | None = None

    def wait_warm(self, timeout_s: float = WARM_UP_TIMEOUT_S) -> bool:
        """Wait for the warm-up (``warm_up``) to end; whether it ran and succeeded."""
        if self.warm_up is None:
            return False
        try:
            return self.warm_up.wait(timeout=timeout_s) == 0
        except subprocess.TimeoutExpired:
            return False


def start_server(port: int = DEFAULT_PORT, master: str = "local[*]", log_path: Path | None = None,
                 timeout_s: float = START_TIMEOUT_S, *, warm_up: bool = True) -> ConnectServer:
    """Start the server and wait until it accepts connections, then (``warm_up``) start warming
    it in the background (``spark_jobs.warm_up``, its output in the log); :class:`SparkSetupError`
    when the port is taken, Java is missing, or it does not come up (its log, when given, says why)."""
    before_jvm_start()
    if _listening(port):
        raise SparkSetupError(f"port {port} is already in use: stop what listens there or choose another --port")
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
            # the engine this module belongs to, as the run workers import it
            path = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")) if p)
            server.warm_up = _spawn([sys.executable, "-m", "spark_jobs.warm_up", server.url],
                                    dict(env, PYTHONPATH=path), log_path)
    except BaseException:  # its own process group: Ctrl-C while it starts would not reach it
        stop_server(server)
        raise
    return server


def _spawn(command: list[str], env: dict[str, str], log_path: Path | None) -> subprocess.Popen:
    """``command`` in a process group of its own, its output appended to ``log_path``."""
    log = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    finally:
        if log_path is not None:
            log.close()


def stop_server(server: ConnectServer) -> None:
    """Stop the warm-up, if it still runs (it removes its log on SIGTERM), then the server's
    whole process group (the launcher and its JVM)."""
    for proc, grace_s in ((server.warm_up, 15), (server.process, 30)):
        if proc is None:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run a Spark Connect server for the platform's jobs until interrupted, or (with a command "
                    "after --) for as long as that command runs, with LOGPLAT_SPARK_MASTER pointing at it.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0 picks a free one")
    parser.add_argument("--master", default="local[*]", help="the server's Spark master (default local[*])")
    parser.add_argument("--log", type=Path, default=None, help="append the server's output to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- and a command to run with the server")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if command and shutil.which(command[0]) is None:  # before a server is started for nothing
        print(f"error: command not found: {command[0]}", file=sys.stderr)
        return 1
    try:
        server = start_server(args.port or free_port(), args.master, args.log)
    except SparkSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Spark Connect server on {server.url} (master {args.master}"
          f"{f'; its output: {args.log}' if args.log else ''}); " +
          (f"{' '.join(command)} runs with {MASTER_ENV}={server.url}" if command else
           f"export {MASTER_ENV}={server.url}; Ctrl-C stops it"), flush=True)
    try:
        return _run_with(server, command) if command else _serve(server, args.log)
    finally:
        stop_server(server)


def _serve(server: ConnectServer, log: Path | None) -> int:
    """Until interrupted (Ctrl-C or a plain kill), saying when the warm-up is done."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        started = time.monotonic()
        warm = server.wait_warm()
        print(f"warmed up in {time.monotonic() - started:.1f} s" if warm else
              "the warm-up did not finish: the first client pays the warm-up" + (f" (see {log})" if log else ""),
              flush=True)
        server.process.wait()
    except KeyboardInterrupt:
        pass
    return 0


def _run_with(server: ConnectServer, command: list[str]) -> int:
    """``command`` with the server as its Spark, to its end; its exit status. A Ctrl-C reaches
    the command from the terminal and it decides when to end; a plain kill is passed on to it."""
    try:
        child = subprocess.Popen(command, env=dict(os.environ, **{MASTER_ENV: server.url}))
    except OSError as exc:
        print(f"error: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # after the fork: the command keeps its own handling
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    status = child.wait()
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
