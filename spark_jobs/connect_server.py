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
(``worker_daemon``) has the workers' heavy imports done before it forks them.

    .venv/bin/python -m spark_jobs.connect_server --port 15002 --master 'local[*]'
    LOGPLAT_SPARK_MASTER=sc://127.0.0.1:15002 ...   # the platform, logctl --engine spark, the jobs

The server is ``spark-submit`` of Spark's own ``SparkConnectServer`` class from the installed
``pyspark`` (no separate Spark distribution), with the jobs' local defaults and this
interpreter for its Python workers. It runs in its own process group, stopped as a whole.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence

from .errors import SparkSetupError
from .session import CONNECT_DEFAULT_PORT as DEFAULT_PORT
from .session import LOCAL_DEFAULTS, before_jvm_start, check_connect_server

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 120.0
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


def start_server(port: int = DEFAULT_PORT, master: str = "local[*]", log_path: Path | None = None,
                 timeout_s: float = START_TIMEOUT_S) -> subprocess.Popen:
    """Start the server and wait until it accepts connections; :class:`SparkSetupError` when the
    port is taken, Java is missing, or it does not come up (its log, when given, says why)."""
    before_jvm_start()
    if _listening(port):
        raise SparkSetupError(f"port {port} is already in use: stop what listens there or choose another --port")
    env = dict(os.environ, SPARK_HOME=str(spark_home()), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("SPARK_CONF_DIR", None)
    log = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(server_command(port, master), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    finally:
        if log_path is not None:
            log.close()
    deadline = time.monotonic() + timeout_s
    try:
        while not _listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                where = f" (see {log_path})" if log_path is not None else ""
                raise SparkSetupError(f"the Spark Connect server did not start on port {port}{where}")
            time.sleep(0.2)
    except BaseException:  # its own process group: Ctrl-C while it starts would not reach it
        stop_server(proc)
        raise
    return proc


def stop_server(proc: subprocess.Popen) -> None:
    """Stop the server's whole process group (the launcher and its JVM)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def local_connect_server(port: int = DEFAULT_PORT, master: str = "local[*]",
                         log_path: Path | None = None) -> Iterator[str]:
    """A server for the ``with`` block; yields its ``sc://`` URL."""
    proc = start_server(port, master, log_path)
    try:
        yield f"sc://127.0.0.1:{port}"
    finally:
        stop_server(proc)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a Spark Connect server for the platform's jobs until "
                                                 "interrupted.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--master", default="local[*]", help="the server's Spark master (default local[*])")
    parser.add_argument("--log", type=Path, default=None, help="append the server's output to this file")
    args = parser.parse_args(argv)
    try:
        proc = start_server(args.port, args.master, args.log)
    except SparkSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Spark Connect server on sc://127.0.0.1:{args.port} (master {args.master}); "
          f"export LOGPLAT_SPARK_MASTER=sc://127.0.0.1:{args.port}; Ctrl-C stops it", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a plain kill stops the server too
    try:
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop_server(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
