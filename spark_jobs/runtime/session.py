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

import atexit
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from storage_engine import native
from storage_engine.config.values import INT_MAX

from ..errors import SparkSetupError

MASTER_ENV = "LOGPLAT_SPARK_MASTER"
DEFAULT_MASTER = "local[*]"
LOG_LEVEL_ENV = "LOGPLAT_SPARK_LOG_LEVEL"
DEFAULT_LOG_LEVEL = "ERROR"
# what ``SparkContext.setLogLevel`` takes (its VALID_LOG_LEVELS), in any case
SPARK_LOG_LEVELS = ("ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN")
# ``spark.executor.memory``'s default in MiB: a ``local-cluster`` worker must hold one executor
EXECUTOR_MEMORY_MIB = 1024
MIN_JAVA = 17
APP_NAME = "logplat"

# Local settings: few shuffle partitions (the jobs move whole partitions and key-map files, never
# shuffle records; a shuffle is only ever a small one, as a data-source query's), no UI
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
    # an error raised in a Python worker (a data source option refused, a damaged batch) is its
    # message, not the worker's whole Python traceback inside Spark's exception
    "spark.sql.execution.pyspark.udf.hideTraceback.enabled": "true",
}

# A Spark Connect client sets only session settings: the rest are the server's.
REMOTE_DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.pyspark.udf.hideTraceback.enabled": "true",
}
CONNECT_SCHEME = "sc://"
CONNECT_DEFAULT_PORT = 15002  # Spark Connect's own default
CONNECT_PROBE_TIMEOUT_S = 5.0
STANDALONE_SCHEME = "spark://"
STANDALONE_DEFAULT_PORT = 7077
K8S_SCHEME = "k8s://"
_CLUSTER_SCHEMES = (STANDALONE_SCHEME, K8S_SCHEME)  # Spark 4 has no Mesos
# Spark's own forms (SparkMasterRegex), spaces around the numbers included
_LOCAL_MASTER = re.compile(r"local(\[\s*(\*|[0-9]+)\s*(,\s*[0-9]+\s*)?\])?"
                           r"|local-cluster\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]")
# How many closed shared sessions (released, or expired on the server) a client steps over
# before it opens a session of its own; see ``connect_session``.
SHARED_SESSION_GENERATIONS = 64
_SESSION_CLOSED = "INVALID_HANDLE.SESSION_CLOSED"
# this process's client sessions (``connect_session``), by URL and settings
_connect_sessions: dict[tuple[str, tuple[tuple[str, str], ...]], object] = {}
_connect_sessions_lock = threading.Lock()
_process_zip: Path | None = None  # see ``_process_engine_zip``
_process_zip_lock = threading.Lock()

_PACKAGES = ("storage_engine", "spark_jobs")
QUIET_LOG4J = Path(__file__).with_name("log4j2.properties")  # see ``driver_logging``
# What the JVM prints at boot whenever an incubator module is resolved: Spark's launcher always
# adds ``--add-modules=jdk.incubator.vector`` (``JavaModuleOptions``) and no JVM option silences
# it, so ``jvm_stderr`` drops the line.
INCUBATOR_WARNING = b"WARNING: Using incubator modules:"


@dataclass(frozen=True)
class SparkEnvironment:
    """The Spark jobs' settings from the environment, checked (see :func:`spark_environment`)."""

    master: str = DEFAULT_MASTER
    log_level: str = DEFAULT_LOG_LEVEL


def spark_environment(*, probe: bool = False) -> SparkEnvironment:
    """``$LOGPLAT_SPARK_MASTER`` (default ``local[*]``) and ``$LOGPLAT_SPARK_LOG_LEVEL`` (default
    ``ERROR``), each checked by the rules Spark applies once its JVM is up, so a value it would
    refuse is one line naming the variable before any JVM starts (the engine's variables are
    ``storage_engine.logdir.environment``'s). ``probe``: also connect to the master or Spark
    Connect server it names (:func:`check_spark_master`); without, nothing leaves the process."""
    master = os.environ.get(MASTER_ENV) or DEFAULT_MASTER
    try:
        check_spark_master(master) if probe else check_form(master)
    except SparkSetupError as exc:
        raise SparkSetupError(f"{MASTER_ENV}={master}: {exc}") from None
    return SparkEnvironment(master, spark_log_level())


def spark_log_level() -> str:
    """``$LOGPLAT_SPARK_LOG_LEVEL`` (default ``ERROR``) as ``SparkContext.setLogLevel`` takes it;
    :class:`SparkSetupError` naming the variable for a level it refuses."""
    raw = os.environ.get(LOG_LEVEL_ENV) or DEFAULT_LOG_LEVEL
    if raw.upper() not in SPARK_LOG_LEVELS:
        raise SparkSetupError(f"{LOG_LEVEL_ENV}={raw}: not a Spark log level (one of {', '.join(SPARK_LOG_LEVELS)})")
    return raw.upper()


def is_remote(master: str) -> bool:
    """Whether ``master`` names a Spark Connect server rather than a Spark master."""
    return master.startswith(CONNECT_SCHEME)


def check_form(master: str) -> None:
    """:class:`SparkSetupError` unless ``master`` is a Spark master Spark accepts
    (:func:`check_master_form`) or a Spark Connect URL naming a host (``sc://host[:port][/;...]``,
    what the main job and ``ui.sh`` hand their servers), without connecting anywhere."""
    if not is_remote(master):
        check_master_form(master)
        return
    address = master[len(CONNECT_SCHEME):].split("/", 1)[0]
    host, _, port = address.rpartition(":") if ":" in address else (address, "", str(CONNECT_DEFAULT_PORT))
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SparkSetupError(f"not a Spark Connect URL: {master!r} (sc://host:port)")


def check_connect_server(url: str, timeout_s: float = CONNECT_PROBE_TIMEOUT_S) -> None:
    """:class:`SparkSetupError` unless something accepts connections at the ``sc://host:port`` of
    ``url``: the Spark Connect client would otherwise retry for minutes before it says so."""
    reason = _unanswered(url[len(CONNECT_SCHEME):].split("/", 1)[0], CONNECT_DEFAULT_PORT, timeout_s)
    if reason is not None:
        raise SparkSetupError(f"no Spark Connect server answers at {url}: {reason}")


def check_master(master: str, timeout_s: float = CONNECT_PROBE_TIMEOUT_S) -> None:
    """:class:`SparkSetupError` unless ``master`` is one Spark accepts (:func:`check_master_form`)
    and, for a standalone ``spark://`` master, one of its hosts, for a ``k8s://`` master its API
    server, accepts connections: Spark would start a JVM first, then fail with pages of Java (a
    standalone master after a minute of retries)."""
    check_master_form(master)
    if master.startswith(STANDALONE_SCHEME):
        reasons = [_unanswered(address, STANDALONE_DEFAULT_PORT, timeout_s)
                   for address in master[len(STANDALONE_SCHEME):].split(",")]
        if all(reasons):
            raise SparkSetupError(f"no Spark master answers at {master}: {reasons[0]}")
    if master.startswith(K8S_SCHEME):
        host, port = _k8s_api_server(master)
        if (reason := _unanswered(f"{host}:{port}", port, timeout_s)) is not None:
            raise SparkSetupError(f"no Kubernetes API server answers at {master}: {reason}")


def check_master_form(master: str) -> None:
    """:class:`SparkSetupError` unless ``master`` is one Spark accepts (``local[N]``,
    ``local-cluster[N, C, M]``, ``spark://``, ``yarn``, ``k8s://``) by the rules Spark applies
    when its context starts (``SparkMasterRegex``, ``Utils.checkAndGetK8sMasterUrl``), without
    connecting anywhere."""
    local = _LOCAL_MASTER.fullmatch(master)
    if not (local or master == "yarn" or master.startswith(_CLUSTER_SCHEMES)):
        raise SparkSetupError(f"not a Spark master: {master!r} (local[N], spark://host:port, yarn, k8s://..., "
                              f"or {CONNECT_SCHEME}host:port for a Spark Connect server)")
    # Spark parses the counts in a local master as Java ints
    if local and not all(low <= int(n) <= INT_MAX for n, low in _local_counts(local)):
        raise SparkSetupError(f"not a Spark master: {master!r}: its thread and worker counts must be 1 to "
                              f"{INT_MAX} (a failure count 0 to {INT_MAX})")
    if local and master.startswith("local-cluster") and int(_local_counts(local)[2][0]) < EXECUTOR_MEMORY_MIB:
        raise SparkSetupError(f"not a Spark master: {master!r}: a local-cluster worker's memory must hold an "
                              f"executor's {EXECUTOR_MEMORY_MIB} MiB")
    if master == "yarn" and "HADOOP_CONF_DIR" not in os.environ and "YARN_CONF_DIR" not in os.environ:
        raise SparkSetupError("the master 'yarn' needs HADOOP_CONF_DIR or YARN_CONF_DIR set to the cluster's "
                              "configuration directory")
    if master.startswith(K8S_SCHEME):
        _k8s_api_server(master)


def _k8s_api_server(master: str) -> tuple[str, int]:
    """The host and port of a ``k8s://`` master's API server, as Spark's
    ``Utils.checkAndGetK8sMasterUrl`` resolves it (no scheme: ``https``; only ``http`` and
    ``https``); :class:`SparkSetupError` for one it refuses or that names no host."""
    rest = master[len(K8S_SCHEME):]
    try:
        url = urlsplit(rest if "://" in rest else f"https://{rest}")
        scheme, host, port = url.scheme.lower(), url.hostname, url.port
    except ValueError as exc:
        raise SparkSetupError(f"not a Spark master: {master!r}: {exc}") from None
    if scheme not in ("http", "https"):
        raise SparkSetupError(f"not a Spark master: {master!r}: a Kubernetes master's scheme is http or https, "
                              f"not {scheme}")
    if not host:
        raise SparkSetupError(f"not a Spark master: {master!r}: it names no Kubernetes API server host")
    return host, port or (443 if scheme == "https" else 80)


def check_spark_master(master: str) -> None:
    """:class:`SparkSetupError` unless ``master`` (a Spark master or a Spark Connect URL) can be
    used: for a tool that only hands it on (the main job, the UI), so a bad value is one line at
    the start, not a failure in every run."""
    if is_remote(master):
        check_connect_server(master)
    else:
        check_master(master)


def _local_counts(local: re.Match) -> list[tuple[str, int]]:
    """The counts of a local master with the least Spark takes for each: ``local[N, F]`` needs
    N >= 1 threads (``*`` is no count) and allows F >= 0 task failures; every count of
    ``local-cluster[workers, cores, memory]`` must be at least 1."""
    if local.group(0).startswith("local-cluster"):
        return [(n, 1) for n in re.findall(r"[0-9]+", local.group(0))]
    threads, failures = local.group(2), local.group(3)
    return ([(threads, 1)] if threads and threads != "*" else []) + ([(failures.strip(" ,"), 0)] if failures else [])


def _unanswered(address: str, default_port: int, timeout_s: float) -> str | None:
    """Why nothing accepts connections at ``host[:port]``; None when something does."""
    host, _, port = address.rpartition(":") if ":" in address else (address, "", "")
    try:
        with socket.create_connection((host or "localhost", int(port or default_port)), timeout=timeout_s):
            return None
    except (OSError, ValueError) as exc:
        return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext on this side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_config(master: str, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The builder settings for ``master``: the master (``spark.master``, or ``spark.remote`` for
    a Spark Connect server) and the defaults that apply to it, then ``conf``."""
    if is_remote(master):
        return {**REMOTE_DEFAULTS, "spark.remote": master, **dict(conf or {})}
    return {**LOCAL_DEFAULTS, **driver_logging(), "spark.master": master, **dict(conf or {})}


def driver_logging() -> dict[str, str]:
    """The JVM option that gives a driver started in this process our quiet log4j profile
    (``log4j2.properties`` here: errors only), so a command's stderr is its own lines, not
    Spark's start-up chatter. A Spark its user configured (``SPARK_CONF_DIR`` set, or a
    ``SPARK_HOME`` with a ``conf`` folder) keeps its own logging: nothing is added then. The
    option goes in ``spark.driver.defaultJavaOptions``, which a user's
    ``spark.driver.extraJavaOptions`` extends rather than replaces."""
    home = os.environ.get("SPARK_HOME")
    if os.environ.get("SPARK_CONF_DIR") or (home and os.path.isdir(os.path.join(home, "conf"))):
        return {}
    return {"spark.driver.defaultJavaOptions": f'"-Dlog4j2.configurationFile={QUIET_LOG4J}"'}


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


def _engine_files() -> Iterator[tuple[str, Path]]:
    """The engine's source files, with their names inside the zip, in a stable order, and the
    compiled record core this process loaded, when it is usable here (built from these sources:
    a stale or missing one is not shipped, so the workers run the reference, as this process
    does). The workers extract it from the zip (``storage_engine.native``)."""
    root = Path(__file__).resolve().parents[2]  # spark_jobs/runtime/session.py -> the packages' parent
    for pkg in _PACKAGES:
        assert (root / pkg / "__init__.py").is_file(), f"{pkg} is not beside spark_jobs in {root}"
        for path in sorted((root / pkg).rglob("*.py")):
            yield path.relative_to(root).as_posix(), path
    core = native.usable_core_file()
    if core is not None:
        yield "storage_engine/native/_core.so", core


def engine_zip(directory: Path) -> Path:
    """The engine's packages as a zip in ``directory`` for ``addPyFile`` and ``addArtifacts``
    (cluster workers without our venv, a Spark Connect server's workers).

    The same source always gives the same bytes (fixed timestamps and modes): a Spark Connect
    server refuses an artifact that differs from the one its session already holds under the
    same name, and every client of a shared session adds it again."""
    target = Path(directory) / "logplat_engine.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, path in _engine_files():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, path.read_bytes())
    return target


def engine_fingerprint() -> str:
    """A digest of the engine's source: equal digests, equal engine (names a shared session)."""
    digest = hashlib.sha256()
    for name, path in _engine_files():
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def shared_session_id(fingerprint: str, generation: int) -> str:
    """The Spark Connect session id every client of this engine uses (a UUID, as the server
    requires), one per ``generation``: the next is used when the server closed the previous."""
    digest = hashlib.sha256(f"logplat/{fingerprint}/{generation}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def with_session_id(url: str, session_id: str) -> str:
    """``url`` (``sc://host:port`` with or without ``/;`` parameters) naming ``session_id``."""
    return f"{url if '/;' in url else url.rstrip('/') + '/'};session_id={session_id}"


def connect_session(url: str, conf: Mapping[str, str] | None = None):
    """A client session on the Spark Connect server at ``url``, shared by every client that runs
    this engine.

    Why shared: the server gives each session Python workers of its own (a daemon keyed by the
    session's artifact UUID), started by the session's first job (~1.5 s here) and, in Spark 4.3,
    never stopped when the session ends (SPARK-54055 tracks it). A Dagster run worker is a fresh
    process per run, so one session each would pay that start on every run and leave a daemon
    behind. The session id is derived from the engine's fingerprint: clients of one engine meet
    warm workers; a client whose engine differs gets a session, and workers, of its own.
    Clients never release the shared session (``release_session_on_close``); the server ends it
    when it is idle past its timeout, and an ended id cannot be reopened
    (``INVALID_HANDLE.SESSION_CLOSED``), so the next generation's id is taken, and after
    :data:`SHARED_SESSION_GENERATIONS` a session of the client's own. A ``url`` that names its
    own ``session_id`` is used as it is. Settings are the session's, shared with every client of
    it: only clients with ``REMOTE_DEFAULTS`` alone share; ``conf`` that adds or changes any
    gives the client a session of its own. Like ``getOrCreate``, a process's first session for a
    URL and settings is handed back until it is stopped: one gRPC client each (several left
    open at interpreter exit can hang it in gRPC's close).
    """
    settings = {k: str(v) for k, v in {**REMOTE_DEFAULTS, **dict(conf or {})}.items() if k != "spark.remote"}
    key = (url, tuple(sorted(settings.items())))
    with _connect_sessions_lock:
        spark = _connect_sessions.get(key)
        if spark is None or spark.is_stopped:
            spark = _connect_sessions[key] = _open_connect_session(url, settings)
        return spark


def _open_connect_session(url: str, settings: dict[str, str]):
    own_settings = settings != {k: str(v) for k, v in REMOTE_DEFAULTS.items()}
    if "session_id=" in url or own_settings:  # settings are the session's: other clients' too
        return _create_connect_session(url, settings)
    fingerprint = engine_fingerprint()
    for generation in range(SHARED_SESSION_GENERATIONS):
        try:
            spark = _create_connect_session(with_session_id(url, shared_session_id(fingerprint, generation)), settings)
        except Exception as exc:  # pyspark raises several classes for a server's error
            if _SESSION_CLOSED in str(exc):
                continue
            raise
        spark.release_session_on_close = False
        return spark
    return _create_connect_session(url, settings)


def _create_connect_session(url: str, settings: Mapping[str, str]):
    """A new client session with ``settings``. Setting them is its first call to the server, so a
    session id the server has closed fails there; the failed client is stopped (without a
    release: there is nothing of its own to release) so that it is neither left as the
    process's default session nor closed half-way at interpreter exit."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).create()
    try:
        for key, value in settings.items():
            spark.conf.set(key, str(value))
    except Exception:
        spark.release_session_on_close = False
        spark.stop()
        raise
    return spark


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
    :class:`SparkSetupError` when Java is missing or too old, or the master is not one or does
    not answer, before any JVM is started (a Spark Connect client needs no Java, but a server
    that answers), and when Spark cannot start the session all the same.
    """
    if master is None:  # every LOGPLAT_SPARK_* value, checked before a JVM starts
        master = spark_environment(probe=True).master
    else:
        check_spark_master(master)
        spark_log_level()
    if is_remote(master):
        return prepare_session(connect_session(master, session_config(master, conf)), ship_engine=ship_engine)
    before_jvm_start()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in session_config(master, {"spark.app.name": app_name, **dict(conf or {})}).items():
        builder = builder.config(key, str(value))
    try:
        with jvm_stderr():
            spark = builder.getOrCreate()
    except Exception as exc:  # Py4J and PySpark errors, after the JVM printed its own reasons
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkSetupError(f"Spark could not start a session on {master}: {first}") from None
    return prepare_session(spark, ship_engine=ship_engine)


def before_jvm_start() -> None:
    """What must hold before any builder starts the JVM: Java 17+, workers on this interpreter."""
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@contextmanager
def jvm_stderr() -> Iterator[None]:
    """Give a JVM started inside the block a stderr that this process forwards to its own, line
    by line for as long as the JVM runs, without the incubator-modules warning (see
    ``INCUBATOR_WARNING``): a command's stderr is then its own lines and Spark's errors."""
    read_end, write_end = os.pipe()
    original = os.dup(2)
    threading.Thread(target=_forward_jvm_stderr, args=(read_end, os.dup(original)), daemon=True,
                     name="jvm-stderr").start()
    sys.stderr.flush()
    os.dup2(write_end, 2)  # inherited by the JVM; this process gets its own stderr back below
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)
        os.close(original)


def _forward_jvm_stderr(read_end: int, out: int) -> None:
    """Copy the JVM's stderr lines to ``out`` but the incubator warning, until the JVM exits."""
    with open(read_end, "rb") as source, open(out, "wb", buffering=0) as sink:
        for line in source:
            if not line.startswith(INCUBATOR_WARNING):
                sink.write(line)


def prepare_session(spark, *, ship_engine: bool | None = None):
    """Make a session from any builder (ours, dagster-pyspark's) ready for the jobs: quiet logs,
    the engine shipped to a non-local master or a Spark Connect server (whose Python workers
    then run the engine this client planned with, however long the server has been up), the
    ``kafka-log`` data source registered."""
    if is_connect(spark):
        if ship_engine is None or ship_engine:
            with tempfile.TemporaryDirectory(prefix="logplat-pyfiles-") as directory:  # uploaded at once
                spark.addArtifacts(str(engine_zip(Path(directory))), pyfile=True)
    else:
        spark.sparkContext.setLogLevel(spark_log_level())
        if ship_engine is None:
            ship_engine = not spark.sparkContext.master.startswith("local")
        if ship_engine:
            spark.sparkContext.addPyFile(str(_process_engine_zip()))
    register_data_source(spark)
    return spark


def _process_engine_zip() -> Path:
    """The engine zip of this process's classic sessions: their driver serves executors the file
    from its path for as long as it runs, so it is built once and removed when the process exits."""
    global _process_zip
    with _process_zip_lock:
        if _process_zip is None or not _process_zip.exists():
            directory = tempfile.mkdtemp(prefix="logplat-pyfiles-")
            atexit.register(shutil.rmtree, directory, ignore_errors=True)
            _process_zip = engine_zip(Path(directory))
        return _process_zip


def register_data_source(spark) -> None:
    """Register ``kafka-log`` with ``spark`` (idempotent; sessions from other builders need it)."""
    from ..datasource import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)
