"""A live Apache Kafka 4.4 broker for the interop tests and the benchmarks.

:func:`kafka_distribution` fetches ``org.apache.kafka:kafka_2.13:4.4.0`` and its runtime
dependencies with Maven into a cache (``$LOGPLAT_KAFKA_CACHE``, default
``~/.cache/logplat/kafka-4.4.0``) the next run reuses; :class:`KafkaBroker` runs one KRaft node
(broker and controller in one JVM) on 127.0.0.1 with free ports, its topic log dirs and its
metadata log apart in a work folder of ours, and stops it cleanly (SIGTERM: the broker writes
``.kafka_cleanshutdown``) or kills it.

The broker's own log is ``server.log``; the cleaner's steps (``kafka.log.LogCleaner``, and
``org.apache.kafka.storage.internals.log.LogCleaner`` and ``Cleaner`` since 4.x) and its
statistics (``LogCleaner$CleanerThread``: a ``$`` name is no child of ``LogCleaner`` in log4j's
dotted hierarchy, so it is named on its own) go to ``log-cleaner.log``, as in Kafka's own
``config/log4j2.yaml``. Both are in the work folder.

:class:`KafkaUnavailable` means Java or Maven is missing or Maven Central cannot be reached: the
tests skip with its message, or fail with it when ``LOGPLAT_REQUIRE_KAFKA=1`` (CI sets it, so a
runner without Java cannot pass by skipping every live test). Any other failure (the broker
exits, never serves) is an error.

Ports: :func:`free_port` binds port 0 and lets go, so another process can take the port before
the JVM binds it, and :meth:`KafkaBroker.restart` reuses the ports of the last start. A start
whose output says ``Address already in use`` is retried on fresh ports (the listener and the
static ``controller.quorum.voters`` port live only in ``server.properties``, which every start
rewrites; the metadata log does not record them).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

KAFKA_VERSION = "4.4.0"
KAFKA_ARTIFACT = f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}"
#: log4j-slf4j-impl routes Kafka's slf4j logging into log4j2 (the distribution ships it in libs/)
EXTRA_ARTIFACTS = ("org.apache.logging.log4j:log4j-slf4j-impl:2.25.5",)
START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 60
CLEANED_TIMEOUT_S = 60
PORT_ATTEMPTS = 3  # starts on fresh ports after "Address already in use"
PORT_TAKEN = "Address already in use"
REQUIRE_ENV = "LOGPLAT_REQUIRE_KAFKA"
CLUSTER_ID = "bG9ncGxhdC1rYWZrYS0w"  # any 16-byte base64url id; fixed so a restarted node keeps it

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>logplat</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <dependencies>{deps}</dependencies>
</project>
"""

_LOG4J2 = """\
status = warn
appender.server.type = File
appender.server.name = server
appender.server.fileName = {dir}/server.log
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = [%d] %p %m (%c)%n
appender.cleaner.type = File
appender.cleaner.name = cleaner
appender.cleaner.fileName = {dir}/log-cleaner.log
appender.cleaner.layout.type = PatternLayout
appender.cleaner.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.server.ref = server
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = INFO
logger.cleaner.additivity = false
logger.cleaner.appenderRef.cleaner.ref = cleaner
logger.cleaner2.name = org.apache.kafka.storage.internals.log.LogCleaner
logger.cleaner2.level = INFO
logger.cleaner2.additivity = false
logger.cleaner2.appenderRef.cleaner.ref = cleaner
logger.cleaner3.name = org.apache.kafka.storage.internals.log.Cleaner
logger.cleaner3.level = INFO
logger.cleaner3.additivity = false
logger.cleaner3.appenderRef.cleaner.ref = cleaner
logger.cleaner4.name = org.apache.kafka.storage.internals.log.LogCleaner$CleanerThread
logger.cleaner4.level = INFO
logger.cleaner4.additivity = false
logger.cleaner4.appenderRef.cleaner.ref = cleaner
"""


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or Maven Central cannot be reached: the broker cannot be had."""


class KafkaBrokerError(RuntimeError):
    """The broker was fetched but did not start, serve or stop as it should."""


class PortTaken(KafkaBrokerError):
    """The JVM could not bind one of its ports: another process took it (a fresh start may not)."""


def cache_dir() -> Path:
    configured = os.environ.get("LOGPLAT_KAFKA_CACHE")
    base = Path(configured) if configured else Path.home() / ".cache" / "logplat"
    return base / f"kafka-{KAFKA_VERSION}"


def kafka_distribution() -> Path:
    """The folder of Kafka's jars (``libs/``), fetched once and reused from the cache after."""
    root = cache_dir()
    libs = root / "libs"
    if (root / "complete").exists():
        return libs
    try:  # a cache that cannot be made is the caller's to correct, not a reason to skip
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KafkaBrokerError(f"the Kafka cache {root} cannot be made ({exc.strerror}): set LOGPLAT_KAFKA_CACHE "
                               "to a writable directory") from None
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if not java or not mvn:
        raise KafkaUnavailable(f"the live Kafka broker needs java and mvn on PATH (java={java}, mvn={mvn})")
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in (s.split(":") for s in (KAFKA_ARTIFACT, *EXTRA_ARTIFACTS)))
    (root / "pom.xml").write_text(_POM.format(deps=deps))
    staging = root / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    done = subprocess.run(
        [mvn, "-q", "-B", "-f", str(root / "pom.xml"), "dependency:copy-dependencies",
         f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
        capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise KafkaUnavailable(f"Maven could not fetch {KAFKA_ARTIFACT} from Maven Central: {' / '.join(tail)}")
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    (root / "complete").write_text(KAFKA_ARTIFACT + "\n")
    return libs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class KafkaBroker:
    """One KRaft node (``process.roles=broker,controller``) over ``workdir``.

    ``log_dirs`` hold the topic partitions only (the metadata log is in ``workdir/metadata``), so
    a test can put a partition folder of ours there while the broker is stopped. ``overrides``
    are extra ``server.properties`` lines (cleaner back-off, ``cordoned.log.dirs``...).
    """

    workdir: Path
    libs: Path
    log_dir_count: int = 1
    overrides: dict[str, str] = field(default_factory=dict)
    port: int = 0
    controller_port: int = 0
    process: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        self.controller_port = self.controller_port or free_port()
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)

    @property
    def log_dirs(self) -> list[Path]:
        return [self.workdir / f"logs-{i}" for i in range(self.log_dir_count)]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def server_log(self) -> Path:
        return self.workdir / "server.log"

    @property
    def cleaner_log(self) -> Path:
        return self.workdir / "log-cleaner.log"

    def properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "metadata.log.dir": str(self.workdir / "metadata"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.cleaner.backoff.ms": "200",
            "log.cleaner.threads": "1",
        }
        props.update(self.overrides)
        return props

    def _java(self, main: str, *args: str) -> list[str]:
        return ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.workdir}", "-cp", f"{self.libs}/*", main, *args]

    def _write_config(self) -> Path:
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.workdir / "log4j2.properties").write_text(_LOG4J2.format(dir=self.workdir))
        return path

    def format(self) -> None:
        """``kafka-storage format`` once: the metadata log and each log dir's ``meta.properties``."""
        config = self._write_config()
        if (self.workdir / "metadata" / "meta.properties").exists():
            return
        done = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", CLUSTER_ID, "-c", str(config)),
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise KafkaBrokerError(f"kafka-storage format failed: {(done.stdout + done.stderr).strip()[-500:]}")

    def start(self) -> KafkaBroker:
        """Start and wait until it serves; on :class:`PortTaken`, again on fresh ports."""
        self.format()
        attempts_left = PORT_ATTEMPTS
        while True:
            try:
                self._launch()
                return self
            except PortTaken:
                self.kill()
                attempts_left -= 1
                if not attempts_left:
                    raise
                self.port, self.controller_port = free_port(), free_port()

    def _launch(self) -> None:
        self._write_config()
        marks = {name: self._size(name) for name in ("server.log", "stdout.log")}
        out = open(self.workdir / "stdout.log", "ab")  # noqa: SIM115 - the JVM owns it while it runs
        self.process = subprocess.Popen(self._java("kafka.Kafka", str(self.workdir / "server.properties")),
                                        stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        self.wait_until_serving(marks)

    def _size(self, name: str) -> int:
        path = self.workdir / name
        return path.stat().st_size if path.exists() else 0

    def _output_since(self, marks: dict[str, int]) -> str:
        """What ``server.log`` and ``stdout.log`` got after ``marks`` (their sizes before a start)."""
        text = []
        for name, mark in marks.items():
            path = self.workdir / name
            if path.exists():
                with open(path, "rb") as f:
                    f.seek(mark)
                    text.append(f.read().decode("utf-8", "replace"))
        return "\n".join(text)

    def wait_until_serving(self, marks: dict[str, int]) -> None:
        """Until the admin client lists topics; :class:`PortTaken` as soon as the output since
        ``marks`` says a port could not be bound (the JVM may linger before it exits)."""
        from kafka import KafkaAdminClient

        deadline = time.monotonic() + START_TIMEOUT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            exited = self.process is not None and self.process.poll() is not None
            if PORT_TAKEN in self._output_since(marks):
                raise PortTaken(f"port {self.port} or {self.controller_port} was taken: {self._tail()}")
            if exited:
                raise KafkaBrokerError(f"the broker exited with {self.process.returncode}: {self._tail()}")
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000,
                                         bootstrap_timeout_ms=2000)  # short tries: the output is read between
                try:
                    admin.list_topics()
                    return
                finally:
                    admin.close()
            except Exception as e:  # noqa: BLE001 - not up yet: retried until the deadline
                last = e
                time.sleep(0.3)
        raise KafkaBrokerError(f"the broker did not serve within {START_TIMEOUT_S} s ({last}): {self._tail()}")

    def _tail(self) -> str:
        for name in ("server.log", "stdout.log"):
            path = self.workdir / name
            if path.exists():
                return " / ".join(path.read_text(errors="replace").strip().splitlines()[-5:])
        return "(no log)"

    def stop(self) -> None:
        """Clean shutdown: SIGTERM and wait (the broker flushes and writes ``.kafka_cleanshutdown``)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise KafkaBrokerError(f"the broker did not stop within {STOP_TIMEOUT_S} s") from None

    def kill(self) -> None:
        """SIGKILL: no clean-shutdown marker, the next start recovers."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> KafkaBroker:
        self.stop()
        return self.start()

    def log_mark(self) -> int:
        """The size of ``server.log`` now: pass to :meth:`server_log_since` to read what came after."""
        return self.server_log.stat().st_size if self.server_log.exists() else 0

    def server_log_since(self, mark: int) -> str:
        with open(self.server_log, "rb") as f:
            f.seek(mark)
            return f.read().decode("utf-8", "replace")

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        """The log dir folder that holds ``topic-partition`` (whichever log dir the broker chose)."""
        for d in self.log_dirs:
            candidate = d / f"{topic}-{partition}"
            if candidate.is_dir():
                return candidate
        raise KafkaBrokerError(f"{topic}-{partition} is in none of the broker's log dirs")

    # -- the cleaner ---------------------------------------------------------------------

    def cleaned_to(self, topic: str, partition: int = 0) -> int | None:
        """The cleaner's checkpoint of ``topic-partition`` (``cleaner-offset-checkpoint``: the
        first dirty offset), or None before its first cleaning."""
        from storage_engine.log.checkpoint import CLEANER_OFFSET_CHECKPOINT, read_checkpoint

        path = self.partition_dir(topic, partition).parent / CLEANER_OFFSET_CHECKPOINT
        return read_checkpoint(path).get((topic, partition)) if path.exists() else None

    def active_segment(self, topic: str, partition: int = 0) -> int:
        """The base offset of the partition's newest segment: the cleaner never goes past it."""
        return max(int(p.name[:-4]) for p in self.partition_dir(topic, partition).glob("*.log"))

    def wait_cleaned(self, topic: str, partition: int = 0, *, upto: int | None = None,
                     timeout_s: float = CLEANED_TIMEOUT_S) -> int:
        """Wait until the cleaner's checkpoint of ``topic-partition`` reaches ``upto`` (default:
        the active segment, so everything cleanable is cleaned, in however many rounds the
        dedupe buffer needs); return it.

        The checkpoint is Kafka's last step of a round (``LogCleanerManager.doneCleaning``,
        after the swap and the statistics), so the segments are final when it moves. With the
        default, no further round follows until the log rolls.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            target = self.active_segment(topic, partition) if upto is None else upto
            cleaned = self.cleaned_to(topic, partition)
            if cleaned is not None and cleaned >= target > 0:  # one segment alone: nothing cleanable yet
                return cleaned
            if time.monotonic() > deadline:
                tail = self.cleaner_log.read_text()[-2000:] if self.cleaner_log.exists() else "(no log-cleaner.log)"
                raise KafkaBrokerError(f"the broker's cleaner did not clean {topic}-{partition} to {target} within "
                                       f"{timeout_s} s (checkpoint {cleaned}):\n{tail}")
            time.sleep(0.1)

    # -- clients -------------------------------------------------------------------------

    def admin(self):
        from kafka import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=30000)

    def create_topic(self, topic: str, configs: dict[str, str] | None = None, partitions: int = 1) -> None:
        from kafka.admin import NewTopic

        admin = self.admin()
        try:
            admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})])
        finally:
            admin.close()
        self.wait_for_leader(topic, partitions)

    def wait_for_leader(self, topic: str, partitions: int = 1, timeout_s: float = 30) -> None:
        from kafka import KafkaConsumer, TopicPartition

        deadline = time.monotonic() + timeout_s
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap)
        try:
            while time.monotonic() < deadline:
                try:
                    ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
                    if len(ends) == partitions:
                        return
                except Exception:  # noqa: BLE001 - no leader yet
                    pass
                time.sleep(0.2)
        finally:
            consumer.close()
        raise KafkaBrokerError(f"{topic} has no leader after {timeout_s} s")

    def producer(self, **config):
        from kafka import KafkaProducer

        return KafkaProducer(bootstrap_servers=self.bootstrap, **config)

    def offsets(self, topic: str, partition: int = 0) -> tuple[int, int]:
        """(log start offset, high watermark) as ListOffsets answers them (earliest, latest)."""
        from kafka import KafkaConsumer, TopicPartition

        tp = TopicPartition(topic, partition)
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap)
        try:
            return consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]
        finally:
            consumer.close()

    def consume(self, topic: str, partition: int = 0, *, isolation_level: str = "read_uncommitted",
                timeout_s: float = 30) -> list:
        """Every record of ``topic-partition`` a real consumer fetches, from the log start to the
        end offset its isolation level sees (the high watermark, or the last stable offset)."""
        from kafka import KafkaConsumer, TopicPartition

        tp = TopicPartition(topic, partition)
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, isolation_level=isolation_level,
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 fetch_max_bytes=8 << 20, max_partition_fetch_bytes=8 << 20)
        try:
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            end = consumer.end_offsets([tp])[tp]  # the LSO under read_committed
            records = []
            deadline = time.monotonic() + timeout_s
            while consumer.position(tp) < end:
                if time.monotonic() > deadline:
                    raise KafkaBrokerError(f"consumer stuck at {consumer.position(tp)} < {end} on {topic}-{partition}")
                for batch in consumer.poll(timeout_ms=500).values():
                    records.extend(batch)
            return records
        finally:
            consumer.close()


#: the files of a partition folder Kafka loads (our own ``remote-log-metadata.json`` and the like stay behind)
KAFKA_PARTITION_FILES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # the high watermarks


def install_partition(broker: KafkaBroker, topic: str, partition: int, source_log_dir: Path) -> Path:
    """Put our ``source_log_dir/topic-partition`` under the stopped broker's partition of that name.

    The broker's ``partition.metadata`` (the topic id KRaft knows) stays; every other file of its
    folder goes, ours come in; the broker log dir's checkpoints get our recovery point and log
    start offset (from ``source_log_dir``'s checkpoints, which our engine wrote on close) and a
    high watermark at our log end, and ``.kafka_cleanshutdown`` is ours, so the broker loads the
    folder as a cleanly shut down log (no recovery).
    """
    from storage_engine.log.checkpoint import (
        CLEANER_OFFSET_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        RECOVERY_POINT_CHECKPOINT,
        read_checkpoint,
        write_checkpoint,
        write_clean_shutdown_marker,
    )
    from storage_engine.logdir.manager import LogManager

    if broker.process is not None and broker.process.poll() is None:
        raise KafkaBrokerError("install_partition needs the broker stopped")
    name = f"{topic}-{partition}"
    source = source_log_dir / name
    with LogManager([source_log_dir]) as ours:  # opening and closing writes our checkpoints
        log = ours.get_log(topic, partition)
        log_end, log_start = log.log_end_offset, log.log_start_offset
    dst = broker.partition_dir(topic, partition)
    for old in dst.iterdir():
        if old.name != "partition.metadata":
            old.unlink()
    for f in sorted(source.iterdir()):
        if f.suffix in KAFKA_PARTITION_FILES or f.name == "leader-epoch-checkpoint":
            shutil.copy2(f, dst / f.name)
    log_dir = dst.parent
    tp = (topic, partition)
    ours_recovery = read_checkpoint(source_log_dir / RECOVERY_POINT_CHECKPOINT)
    for file, offset in ((RECOVERY_POINT_CHECKPOINT, ours_recovery.get(tp, log_end)),
                         (LOG_START_OFFSET_CHECKPOINT, log_start),
                         (REPLICATION_OFFSET_CHECKPOINT, log_end)):
        entries = read_checkpoint(log_dir / file) if (log_dir / file).exists() else {}
        entries[tp] = offset
        write_checkpoint(log_dir / file, entries)
    cleaner = log_dir / CLEANER_OFFSET_CHECKPOINT
    if cleaner.exists():
        entries = read_checkpoint(cleaner)
        entries.pop(tp, None)
        write_checkpoint(cleaner, entries)
    write_clean_shutdown_marker(log_dir, _last_broker_epoch(log_dir))
    return dst


def _last_broker_epoch(log_dir: Path) -> int:
    """The epoch in the broker's own clean-shutdown marker: KRaft's controller compares it with
    the epoch it registered (KIP-966), and a different one makes it elect the leader "unclean"."""
    import json

    marker = log_dir / ".kafka_cleanshutdown"
    if not marker.exists():
        raise KafkaBrokerError(f"{log_dir} has no clean-shutdown marker: the broker was not stopped cleanly")
    return int(json.loads(marker.read_text())["brokerEpoch"])


def ensure_kafka_broker_skippable() -> Path:
    """The distribution, or ``pytest.skip`` with the reason when Java or Maven Central is missing
    (``pytest.fail`` instead when ``LOGPLAT_REQUIRE_KAFKA=1``: the run must have the broker)."""
    import pytest

    try:
        return kafka_distribution()
    except KafkaUnavailable as e:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {e}", pytrace=False)
        pytest.skip(str(e))


@contextmanager
def running_broker(workdir: Path, libs: Path | None = None, **kwargs) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(workdir, libs or kafka_distribution(), **kwargs)
    try:
        yield broker.start()
    finally:
        broker.stop()
        broker.kill()


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
