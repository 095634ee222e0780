"""A broker's ``server.properties``, named by ``$LOGPLAT_SERVER_PROPERTIES``: read safely and
validated before any command uses it."""

from __future__ import annotations

import os
import re
import stat
from typing import Iterable

from ..errors import ServerPropertiesError
from ..nofollow import file_kind
from .broker import build_log_config
from .topic import validate_topic_overrides


def parse_properties(lines: Iterable[str]) -> dict[str, str]:
    """A minimal Java ``.properties`` reader: ``key=value`` or ``key: value``, ``#``/``!`` comments.

    Enough for a broker's ``server.properties`` (no line continuations or escapes).
    """
    props: dict[str, str] = {}
    for line in lines:
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", text)
        if match:
            props[match.group(1)] = match.group(2)
        else:
            props[text] = ""
    return props


SERVER_PROPERTIES_ENV = "LOGPLAT_SERVER_PROPERTIES"


def broker_props_from_env() -> dict[str, str]:
    """Broker-level ``log.*`` settings from the ``server.properties`` file named by
    ``$LOGPLAT_SERVER_PROPERTIES``, if set, read with :func:`parse_properties` and validated.

    The one place the engine reads that variable: the CLI and the platform's settings both call it.
    """
    path = os.environ.get(SERVER_PROPERTIES_ENV)
    if not path:
        return {}
    props = parse_properties(_read_server_properties(path).splitlines())
    build_log_config(props, validate_topic_overrides({}))
    return props


def _read_server_properties(path: str) -> str:
    """The file's text; :class:`ServerPropertiesError` naming the variable and what is wrong
    when it is missing, unreadable, not a regular file (a FIFO would block the read for ever) or
    not UTF-8. A symbolic link is fine: the file is the user's, outside any log dir."""
    where = f"{SERVER_PROPERTIES_ENV}={path}"
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
