"""The one place a SparkSession is built.

Local mode (``local[*]``) is the embedded default, so nothing but Java 17 and the virtual
environment is needed; ``LOGPLAT_SPARK_MASTER`` (or the ``master`` argument) points the same jobs
at a cluster (``spark://host:7077``, ``yarn``, ``k8s://...``) or at a Spark Connect server
(``sc://host:port``: a client session, no JVM in this process; see ``connect_server.py``).
Workers run the driver's interpreter (``PYSPARK_PYTHON``), so the engine they import is the one
the driver planned with; on a non-local master or a Spark Connect server the engine's packages
are also shipped as a zip (``addPyFile``, ``addArtifacts``) for hosts that do not share the
virtual environment.

Spark reads static settings (driver memory, UI, the master) only when the JVM starts: the first
session of a process wins, and ``getOrCreate`` hands it back afterwards. Tests build one per run.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Mapping

from .errors import SparkSetupError

MASTER_ENV = "LOGPLAT_SPARK_MASTER"
DEFAULT_MASTER = "local[*]"
MIN_JAVA = 17
APP_NAME = "logplat"

# Local settings: small shuffles (jobs shuffle keys of a few partitions, not terabytes), no UI
# unless asked for, UTC everywhere (Kafka timestamps are UTC milliseconds).
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.worker.reuse": "true",
    "spark.driver.memory": "2g",
}

# A Spark Connect client sets only session settings: the rest are the server's.
REMOTE_DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
CONNECT_SCHEME = "sc://"
CONNECT_DEFAULT_PORT = 15002  # Spark Connect's own default
CONNECT_PROBE_TIMEOUT_S = 5.0

_PACKAGES = ("storage_engine", "spark_jobs")


def spark_master(master: str | None = None) -> str:
    """The master to use: the argument, else ``$LOGPLAT_SPARK_MASTER``, else ``local[*]``."""
    return master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER


def is_remote(master: str) -> bool:
    """Whether ``master`` names a Spark Connect server rather than a Spark master."""
    return master.startswith(CONNECT_SCHEME)


def check_connect_server(url: str, timeout_s: float = CONNECT_PROBE_TIMEOUT_S) -> None:
    """:class:`SparkSetupError` unless something accepts connections at the ``sc://host:port`` of
    ``url``: the Spark Connect client would otherwise retry for minutes before it says so."""
    address = url[len(CONNECT_SCHEME):].split("/", 1)[0]
    host, _, port = address.rpartition(":") if ":" in address else (address, "", "")
    try:
        with socket.create_connection((host or "localhost", int(port or CONNECT_DEFAULT_PORT)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise SparkSetupError(f"no Spark Connect server answers at {url}: {reason}") from None


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext on this side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_config(master: str, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The builder settings for ``master``: the master (``spark.master``, or ``spark.remote`` for
    a Spark Connect server) and the defaults that apply to it, then ``conf``."""
    if is_remote(master):
        return {**REMOTE_DEFAULTS, "spark.remote": master, **dict(conf or {})}
    return {**LOCAL_DEFAULTS, "spark.master": master, **dict(conf or {})}


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def java_major_version(java: str | None = None) -> int:
    """The major version of the ``java`` Spark will start; :class:`SparkSetupError` when there is
    none or it cannot say."""
    java = java or _java_binary()
    if java is None:
        raise SparkSetupError(
            f"Java was not found (no JAVA_HOME, no java on PATH): PySpark needs Java {MIN_JAVA} or newer"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkSetupError(f"could not run {java} -version: {exc}") from None
    text = out.stderr + out.stdout
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        raise SparkSetupError(f"could not read the Java version from {java} -version: {text.strip()[:200]!r}")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_x" style
        major = int(m.group(2))
    return major


def check_java(java: str | None = None) -> int:
    major = java_major_version(java)
    if major < MIN_JAVA:
        raise SparkSetupError(
            f"Java {major} found ({java or _java_binary()}), PySpark 4 needs Java {MIN_JAVA} or newer: "
            "install it and set JAVA_HOME"
        )
    return major


def engine_zip(directory: Path | None = None) -> Path:
    """The engine's packages as a zip for ``addPyFile`` (cluster workers without our venv)."""
    root = Path(__file__).resolve().parents[1]
    directory = Path(directory or tempfile.mkdtemp(prefix="logplat-pyfiles-"))
    target = directory / "logplat_engine.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for pkg in _PACKAGES:
            for path in sorted((root / pkg).rglob("*.py")):
                zf.write(path, path.relative_to(root).as_posix())
    return target


def build_spark_session(
    master: str | None = None,
    *,
    app_name: str = APP_NAME,
    conf: Mapping[str, str] | None = None,
    ship_engine: bool | None = None,
):
    """A SparkSession for the jobs, with the ``kafka-log`` data source registered.

    ``conf`` overrides the defaults. ``ship_engine`` (default: on for non-local masters and
    Spark Connect servers) adds the engine as a zip to the session. Raises
    :class:`SparkSetupError` when Java is missing or too old, before any JVM is started (a
    Spark Connect client needs no Java, but a server that answers).
    """
    master = spark_master(master)
    if is_remote(master):
        check_connect_server(master)
    else:
        before_jvm_start()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    named = dict(conf or {}) if is_remote(master) else {"spark.app.name": app_name, **dict(conf or {})}
    for key, value in session_config(master, named).items():
        builder = builder.config(key, str(value))
    return prepare_session(builder.getOrCreate(), ship_engine=ship_engine)


def before_jvm_start() -> None:
    """What must hold before any builder starts the JVM: Java 17+, workers on this interpreter."""
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def prepare_session(spark, *, ship_engine: bool | None = None):
    """Make a session from any builder (ours, dagster-pyspark's) ready for the jobs: quiet logs,
    the engine shipped to a non-local master or a Spark Connect server (whose Python workers
    then run the engine this client planned with, however long the server has been up), the
    ``kafka-log`` data source registered."""
    if is_connect(spark):
        if ship_engine is None or ship_engine:
            spark.addArtifacts(str(engine_zip()), pyfile=True)
    else:
        spark.sparkContext.setLogLevel(os.environ.get("LOGPLAT_SPARK_LOG_LEVEL", "ERROR"))
        if ship_engine is None:
            ship_engine = not spark.sparkContext.master.startswith("local")
        if ship_engine:
            spark.sparkContext.addPyFile(str(engine_zip()))
    register_data_source(spark)
    return spark


def register_data_source(spark) -> None:
    """Register ``kafka-log`` with ``spark`` (idempotent; sessions from other builders need it)."""
    from .datasource import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)
