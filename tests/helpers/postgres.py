"""A throwaway PostgreSQL server for the tests and benchmarks that need a real one.

Dagster's production storage is ``dagster-postgres``; testing it means a real server, and CI has
only the machine's PostgreSQL binaries (``initdb``, ``postgres``, ``createdb``, ``pg_isready``
from one ``bin`` folder: the one ``initdb`` on ``PATH`` resolves to, else the newest
``/usr/lib/postgresql/<major>/bin``). :func:`postgres_server` makes a cluster with ``initdb`` in a
new temporary folder, starts ``postgres`` on ``127.0.0.1`` at a free port (its unix socket in the
same folder, so nothing outside it is touched), hands back a :class:`PostgresServer`, and stops it
with a fast shutdown (SIGINT: running transactions are rolled back, no waiting for clients)
before removing the folder.

``postgres`` refuses to run as root (the tests do, on CI). Run as root, the cluster belongs to
``nobody``, which exists on every Debian system: ``initdb`` and ``postgres`` are started with
their uid and gid set to it (``subprocess``'s ``user``/``group``; no ``sudo`` or ``runuser``
needed, and no account created), the folder is given to it, and clients connect over TCP with
``trust`` authentication as the ``postgres`` superuser, so no password is involved. Run as
anyone else, the server runs as that user.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from spark_jobs.runtime.connect_server import free_port
from tests.helpers.paths import REPO

SUPERUSER = "postgres"
#: The unprivileged account a server started by root runs as.
SERVER_ACCOUNT = "nobody"
#: For tests: a cluster thrown away afterwards needs no durability, and fsync is most of a
#: commit's cost on a shared disk. Benchmarks pass ``{}`` to measure a durable server.
FAST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
STARTUP_TIMEOUT_S = 60.0
SHUTDOWN_TIMEOUT_S = 30.0


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be started here (binaries or the unprivileged account missing);
    the message says which, for a skip reason."""


class PostgresStartError(RuntimeError):
    """``initdb``, ``postgres`` or ``createdb`` failed; the message quotes its output."""


@dataclass(frozen=True)
class PostgresServer:
    """A running server: where it listens, and how to reach a database on it."""

    bindir: Path
    host: str
    port: int
    folder: Path
    run_as: Mapping[str, Any]  # subprocess's user/group/extra_groups, empty when not root

    def url(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@{self.host}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """``createdb name``; returns its URL."""
        _run(self.bindir / "createdb", "-h", self.host, "-p", str(self.port), "-U", SUPERUSER, name)
        return self.url(name)


def find_bindir() -> Path:
    """The folder holding ``initdb`` and its siblings; :class:`PostgresUnavailable` if none."""
    on_path = shutil.which("initdb")
    candidates = [Path(os.path.realpath(on_path)).parent] if on_path else []
    installed = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if p.parent.name.isdigit()]
    candidates += sorted(installed, key=lambda p: int(p.parent.name), reverse=True)  # the newest major first
    for folder in candidates:
        if all((folder / tool).is_file() for tool in ("initdb", "postgres", "createdb", "pg_isready")):
            return folder
    raise PostgresUnavailable("no PostgreSQL server binaries: initdb, postgres, createdb and pg_isready were "
                              "looked for beside initdb on PATH and in /usr/lib/postgresql/*/bin "
                              "(apt-get install postgresql)")


def _unprivileged() -> dict[str, Any]:
    """subprocess arguments that drop root to :data:`SERVER_ACCOUNT`; none when not root."""
    if os.geteuid() != 0:
        return {}
    try:
        account = pwd.getpwnam(SERVER_ACCOUNT)
    except KeyError:
        raise PostgresUnavailable(f"running as root, and postgres refuses root: there is no account "
                                  f"{SERVER_ACCOUNT!r} to run it as") from None
    return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}


def _run(*args: object, **kwargs: Any) -> None:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise PostgresStartError(f"{Path(str(args[0])).name} exited {proc.returncode}: "
                                 f"{(proc.stderr or proc.stdout).strip()[-2000:]}")


def _wait_ready(server: PostgresServer, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        ready = subprocess.run([str(server.bindir / "pg_isready"), "-q", "-h", server.host, "-p", str(server.port)])
        if ready.returncode == 0:
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            state = f"exited {proc.returncode}" if proc.returncode is not None else "not ready in time"
            raise PostgresStartError(f"postgres {state}: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> None:
    """Fast shutdown (SIGINT), SIGKILL if it has not stopped in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def postgres_server(settings: Mapping[str, str] = FAST_SETTINGS) -> Iterator[PostgresServer]:
    """A new cluster on ``127.0.0.1``, running for the block (``settings``: ``postgres -c``
    options). :class:`PostgresUnavailable` when it cannot be had here, :class:`PostgresStartError`
    when it failed to start."""
    bindir = find_bindir()
    run_as = _unprivileged()
    folder = Path(tempfile.mkdtemp(prefix="logplat-postgres-"))
    try:
        if run_as:
            os.chown(folder, run_as["user"], run_as["group"])
        data, log = folder / "data", folder / "postgres.log"
        _run(bindir / "initdb", "-D", data, "-U", SUPERUSER, "--auth=trust", "--no-sync", "-E", "UTF8",
             "--locale=C", cwd=folder, **run_as)
        server = PostgresServer(bindir, "127.0.0.1", free_port(), folder, run_as)
        options = [arg for key, value in {"listen_addresses": server.host, **settings}.items()
                   for arg in ("-c", f"{key}={value}")]
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(bindir / "postgres"), "-D", str(data), "-p", str(server.port),
                                     "-k", str(folder), *options], stdout=out, stderr=subprocess.STDOUT,
                                    cwd=folder, start_new_session=True, **run_as)
        try:
            _wait_ready(server, proc, log)
            yield server
        finally:
            _stop(proc)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def documented_storage() -> dict:
    """The ``storage:`` block docs/operations.md gives operators for PostgreSQL, parsed: what
    runs against the server is what the page says."""
    page = (REPO / "docs" / "operations.md").read_text()
    section = page.split("## Storing the instance in PostgreSQL", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    if block is None:
        raise AssertionError("docs/operations.md lost its PostgreSQL storage block")
    return yaml.safe_load(block.group(1))["storage"]


def write_postgres_home(home: Path, server: PostgresServer, database: str) -> dict[str, str]:
    """Make ``home`` a ``DAGSTER_HOME`` as an operator switching to PostgreSQL would: the
    committed ``dagster.yaml`` with its ``storage:`` block replaced by the documented one.
    Returns the variables that block reads (``DAGSTER_PG_*``, for ``database`` on ``server``)
    and ``DAGSTER_HOME``, for the caller to set."""
    settings = yaml.safe_load((REPO / "dagster_home" / "dagster.yaml").read_text())
    settings["storage"] = documented_storage()
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
    return {"DAGSTER_PG_USERNAME": SUPERUSER, "DAGSTER_PG_PASSWORD": "unused (trust authentication)",
            "DAGSTER_PG_HOST": server.host, "DAGSTER_PG_PORT": str(server.port), "DAGSTER_PG_DB": database,
            "DAGSTER_HOME": str(home)}
