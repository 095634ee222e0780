"""A broker's ``server.properties`` (named by ``$LOGPLAT_SERVER_PROPERTIES``, see
``config.environment``): read safely and validated before any command uses it."""

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


def read_server_properties(path: str, variable: str) -> dict[str, str]:
    """The broker settings in the ``server.properties`` file at ``path`` (named by the
    environment ``variable``), read with :func:`parse_properties` and validated as the broker's
    ``log.*`` topic defaults."""
    props = parse_properties(_read_text(path, f"{variable}={path}").splitlines())
    build_log_config(props, validate_topic_overrides({}))
    return props


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
