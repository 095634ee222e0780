"""A real Spark standalone cluster on loopback, started from the pip distribution.

The ``pyspark`` wheel has no ``sbin/start-*.sh`` scripts, but its jars hold the standalone
master and worker, which ``$SPARK_HOME/bin/spark-class`` starts with ``SPARK_HOME`` set to the
installed package directory. Each daemon runs in its own process group (``spark-class`` execs a
JVM after a launcher JVM), so stopping the cluster kills exactly those groups and nothing else.

    with standalone_cluster(tmp_path) as cluster:
        ... build_spark_session(cluster.master_url) in another process ...
        cluster.state()  # the master's /json/ view: workers, active and completed apps
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from spark_jobs.runtime.connect_server import free_port, spark_home

START_TIMEOUT_S = 90.0


def cluster_env() -> dict[str, str]:
    """The environment of the daemons and of a driver talking to them: loopback only, the
    workers' Python is this interpreter."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    env.pop("SPARK_CONF_DIR", None)
    env.pop("LOGPLAT_SPARK_MASTER", None)
    return env


def daemon_env() -> dict[str, str]:
    """:func:`cluster_env` for the master and worker JVMs: small heaps, quick start-up (C1 only,
    serial GC: they do little work), and no REST submission server (it would take the fixed
    port 6066, so two clusters on one host would collide)."""
    env = cluster_env()
    env["SPARK_DAEMON_MEMORY"] = "256m"
    env["SPARK_DAEMON_JAVA_OPTS"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto"
    # no silent move to the next port: the caller polls the web UI port it chose
    env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false -Dspark.port.maxRetries=0"
    env["SPARK_WORKER_OPTS"] = "-Dspark.worker.cleanup.enabled=false"
    return env


class ClusterError(RuntimeError):
    pass


@dataclass
class Cluster:
    workdir: Path
    port: int
    webui_port: int
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    def state(self, timeout: float = 5.0) -> dict:
        """The master's JSON status page (``aliveworkers``, ``activeapps``, ``completedapps``...)."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=timeout) as resp:
            return json.loads(resp.read().decode())

    def _spawn(self, name: str, args: list[str]) -> None:
        log = self.workdir / f"{name}.log"
        self.logs[name] = log
        with open(log, "wb") as out:
            self.procs[name] = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=daemon_env(), cwd=self.workdir, start_new_session=True,
            )

    def start_master(self) -> None:
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(self.webui_port)])

    def start_worker(self, *, cores: int = 1, memory: str = "1g") -> None:
        work = self.workdir / "worker-work"
        work.mkdir(exist_ok=True)
        self._spawn("worker", ["org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                               "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                               "--work-dir", str(work)])

    def wait_until(self, predicate, what: str, deadline: float) -> dict:
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise ClusterError(f"the {name} exited with {proc.returncode} while waiting for {what}:\n"
                                       + self.tail(name))
            try:
                state = self.state(timeout=2.0)
                if predicate(state):
                    return state
            except (OSError, ValueError) as exc:  # not listening yet / half-written page
                last_error = exc
            time.sleep(0.25)
        raise ClusterError(f"timed out waiting for {what} (last error: {last_error})\n"
                           + "\n".join(self.tail(n) for n in self.procs))

    def tail(self, name: str, lines: int = 40) -> str:
        try:
            text = self.logs[name].read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"[no log for {name}]"
        return f"--- {name} log (last {lines} lines) ---\n" + "\n".join(text)

    def stop(self) -> None:
        """Kill each daemon's process group (launcher and JVM), TERM first, then KILL."""
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for proc in self.procs.values():
            # the group may outlive its leader: kill it in any case
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


@contextlib.contextmanager
def standalone_cluster(workdir: Path, *, cores: int = 1, memory: str = "1g",
                       timeout: float = START_TIMEOUT_S) -> Iterator[Cluster]:
    """A master and one worker on 127.0.0.1, up and registered; both killed on exit.

    The worker starts once the master answers (a worker that finds no master backs off for
    5-15 s before retrying), and the context is entered when the master lists it alive.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    for attempt in range(3):  # the ports were free a moment ago; someone may have taken one since
        cluster = Cluster(workdir, free_port(), free_port())
        cluster.start_master()
        try:
            cluster.wait_until(lambda s, url=cluster.master_url: s.get("status") == "ALIVE" and s.get("url") == url,
                               "the master", deadline)
            break
        except BaseException as exc:
            cluster.stop()
            port_taken = isinstance(exc, ClusterError) and "BindException" in cluster.tail("master", 200)
            if attempt == 2 or not port_taken:
                raise
    try:
        cluster.start_worker(cores=cores, memory=memory)
        cluster.wait_until(lambda s: s.get("aliveworkers", 0) >= 1, "the worker to register", deadline)
        yield cluster
    finally:
        cluster.stop()
