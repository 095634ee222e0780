"""A broker's ``server.properties`` (named by ``$LOGPLAT_SERVER_PROPERTIES``, see
``logdir.environment``): read safely and validated before any command uses it."""

from __future__ import annotations

import difflib
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator

from ..errors import LogError, ServerPropertiesError
from ..files.nofollow import file_kind
from .broker import (
    BROKER_MAPPINGS,
    CORDONED_LOG_DIRS_KEY,
    MAX_PARTITIONS_KEY,
    RETENTION_CHECK_INTERVAL_KEY,
    build_log_config,
    cordoned_log_dir_entries,
    max_partitions_per_topic,
    retention_check_interval_ms,
)
from .cleaner import CLEANER_KEYS, build_cleaner_config
from .topic import validate_topic_overrides

# Kafka broker keys a ``server.properties`` carries that the engine has no use for (a broker's
# network, quorum, replication and threads; the log dirs, which come from ``LOGPLAT_LOG_DIRS``):
# ignored without a word. Any other key is a misspelling or a setting this engine does not have.
IGNORED_BROKER_KEYS = frozenset({
    "advertised.listeners", "auto.create.topics.enable", "auto.leader.rebalance.enable", "broker.id",
    "broker.rack", "controller.listener.names", "controller.quorum.bootstrap.servers",
    "controller.quorum.voters", "default.replication.factor", "delete.topic.enable",
    "group.initial.rebalance.delay.ms", "inter.broker.listener.name", "listener.security.protocol.map",
    "listeners", "log.dir", "log.dirs",
    "log.message.downconversion.enable", "log.message.format.version", "metadata.log.dir", "node.id",
    "num.io.threads", "num.network.threads", "num.partitions", "num.recovery.threads.per.data.dir",
    "num.replica.fetchers", "offsets.topic.replication.factor", "process.roles",
    "share.coordinator.state.topic.min.isr", "share.coordinator.state.topic.replication.factor",
    "socket.receive.buffer.bytes", "socket.request.max.bytes", "socket.send.buffer.bytes",
    "transaction.state.log.min.isr", "transaction.state.log.replication.factor", "zookeeper.connect",
    "zookeeper.connection.timeout.ms",
})
# the broker keys the engine reads
ENGINE_BROKER_KEYS = frozenset({source.key for mapping in BROKER_MAPPINGS for source in mapping.sources}
                               | set(CLEANER_KEYS) | {MAX_PARTITIONS_KEY, RETENTION_CHECK_INTERVAL_KEY,
                                                           CORDONED_LOG_DIRS_KEY})
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE = " \t\f"
#: a key: up to the first unescaped ``=``, ``:`` or whitespace (Java's ``Properties.load``)
_KEY = re.compile(r"(?:\\.|[^=: \t\f\\])*", re.DOTALL)


def parse_properties(lines: Iterable[str]) -> dict[str, str]:
    """``lines`` read as ``java.util.Properties.load`` reads them: ``key=value``, ``key: value``
    or ``key value``; ``#``/``!`` comment lines; a line ending in an odd number of backslashes
    continues on the next, whose leading whitespace is dropped; ``\\t``, ``\\uXXXX`` and other
    escapes in keys and values. A value is trimmed, as Kafka's ``ConfigDef`` trims it."""
    props: dict[str, str] = {}
    for line in _logical_lines(lines):
        key, value = _split_key(line)
        props[_unescape(key)] = _unescape(value).strip()
    return props


def _logical_lines(lines: Iterable[str]) -> Iterator[str]:
    """Java's logical lines: comments and blank lines dropped, continuations joined."""
    pending: str | None = None
    for natural in lines:
        text = natural.lstrip(_WHITESPACE)
        if pending is None and (not text or text[0] in "#!"):
            continue
        backslashes = len(text) - len(text.rstrip("\\"))
        joined = (pending or "") + (text[:-1] if backslashes % 2 else text)
        if backslashes % 2:
            pending = joined
        else:
            pending = None
            yield joined
    if pending is not None:
        yield pending


def _split_key(line: str) -> tuple[str, str]:
    """A logical line's key and value, as Java splits them: the key ends at the first
    unescaped ``=``, ``:`` or whitespace, then whitespace and one ``=`` or ``:`` separate."""
    match = _KEY.match(line)
    assert match is not None  # the pattern matches the empty string
    key = match.group(0)
    rest = line[len(key):].lstrip(_WHITESPACE)
    return key, (rest[1:] if rest[:1] in ("=", ":") else rest).lstrip(_WHITESPACE)


def _unescape(text: str) -> str:
    """Java's ``loadConvert``: ``\\t``, ``\\n``, ``\\r``, ``\\f``, ``\\uXXXX``; any other escaped
    character is itself."""
    def one(match: re.Match) -> str:
        escaped = match.group(1)
        if escaped.startswith("u"):
            if not re.fullmatch(r"u[0-9a-fA-F]{4}", escaped):
                raise ServerPropertiesError(f"malformed \\uxxxx escape in {text!r}")
            return chr(int(escaped[1:], 16))
        return _ESCAPES.get(escaped, escaped)
    return re.sub(r"\\(u.{0,4}|.)", one, text, flags=re.DOTALL)


def read_server_properties(path: str, variable: str) -> dict[str, str]:
    """The broker settings in the ``server.properties`` file at ``path`` (named by the
    environment ``variable``), read with :func:`parse_properties` and every key the engine reads
    checked by the rule that applies it, so a bad value is refused at once, naming the file,
    not by the first command or sensor tick that uses it. A key that is neither one the engine
    reads nor a Kafka broker key it has no use for gets a one-line warning on stderr naming it
    and the file (a misspelt ``log.retention.ms`` would otherwise leave the default in force
    without a word)."""
    where = f"{variable}={path}"
    lines = re.split(r"\r\n|\r|\n", _read_text(path, where))  # Java's line ends only
    try:
        props = parse_properties(lines)
        build_log_config(props, validate_topic_overrides({}))
        build_cleaner_config(props)
        max_partitions_per_topic(props)
        retention_check_interval_ms(props)
        cordoned_log_dir_entries(props)
    except LogError as exc:
        raise ServerPropertiesError(f"{where}: {exc}") from None
    for key in props:
        if (warning := unknown_key_warning(key)) is not None:
            print(f"warning: {where}: {warning}", file=sys.stderr)
    return props


def unknown_key_warning(key: str) -> str | None:
    """What to say of ``key`` in a broker properties file, or None for a key the engine reads or
    a Kafka broker key it ignores: a likely misspelling, naming the closest key it reads."""
    if key in ENGINE_BROKER_KEYS or key in IGNORED_BROKER_KEYS:
        return None
    close = difflib.get_close_matches(key, sorted(ENGINE_BROKER_KEYS), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown key {key!r}{hint}: ignored"


def _read_text(path: str, where: str) -> str:
    """The file's text; :class:`ServerPropertiesError` naming the variable and what is wrong
    when it is missing, unreadable, not a regular file (a FIFO would block the read for ever) or
    not UTF-8. A symbolic link is fine: the file is the user's, outside any log dir."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ServerPropertiesError(f"{where}: cannot read it: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ServerPropertiesError(f"{where}: it is {file_kind(mode)}, not a properties file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError as exc:
        raise ServerPropertiesError(f"{where}: cannot read it: {exc.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ServerPropertiesError(f"{where}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})") from None
