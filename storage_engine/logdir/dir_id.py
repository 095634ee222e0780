"""Log directory ids: Kafka's ``directory.id`` (KIP-858), so that a topic's metadata can name
the log dirs its partitions were placed over, not only count them.

A count let a wrong set pass: given ``d1,d3`` for a topic placed over ``d1,d2``, a produce made
an empty copy, in ``d3``, of a partition that lives in ``d2``. A log dir's id is in
``<log dir>/.logplat-dir.id``: 22 characters, the URL-safe base64 of 16 random bytes without
padding, as Kafka prints a ``Uuid``. It is written once, when a topic change first records the
dir (under the topics lock), and never rewritten: every later read must give the same id. A
broker's ``meta.properties`` id is not taken over: two copies of one broker's log dir would
then share it. The file is read as strictly as command-line input; nothing builds a path from it.
"""

from __future__ import annotations

import base64
import os
import re
import uuid
from pathlib import Path

from ..errors import LogError
from ..files.durable import atomic_write
from ..files.nofollow import open_nofollow

DIR_ID_FILE = ".logplat-dir.id"
_ID = re.compile(r"[A-Za-z0-9_-]{22}")
# Kafka reserves the ids whose 16 bytes are zero but for a last byte below 100 (``DirectoryId``:
# UNASSIGNED, LOST, MIGRATING and room for more)
_RESERVED_BELOW = 100
_MAX_FILE = 64


class DirIdError(LogError):
    """A log dir's id file is not one this engine writes, or two log dirs given share an id."""


def is_dir_id(text: str) -> bool:
    """Whether ``text`` is a directory id as Kafka prints one, and not one of its reserved ids."""
    if not _ID.fullmatch(text):
        return False
    raw = base64.urlsafe_b64decode(text + "==")
    if base64.urlsafe_b64encode(raw).decode().rstrip("=") != text:  # spare bits set: not a printed Uuid
        return False
    return not (raw[:15] == bytes(15) and raw[15] < _RESERVED_BELOW)


def read_dir_id(log_dir: Path) -> str | None:
    """The log dir's id; None when it has none yet. A symlink, or a file that holds anything but
    one id, is refused, naming the file."""
    path = Path(log_dir) / DIR_ID_FILE
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        data = os.read(fd, _MAX_FILE)  # an id and a newline, or a little space: never the whole of a huge file
    finally:
        os.close(fd)
    text = data.decode("ascii", "replace").strip() if len(data) < _MAX_FILE else ""
    if not is_dir_id(text):
        raise DirIdError(f"{path} holds no log dir id (22 characters of URL-safe base64, as Kafka's directory.id); "
                         "restore the file this log dir had, or remove it if no topic was ever placed here")
    return text


def assign_dir_id(log_dir: Path) -> str:
    """The log dir's id, a new one written first if it has none. The caller holds the topics
    lock, so two processes never write two ids."""
    found = read_dir_id(log_dir)
    if found is not None:
        return found
    new = _new_dir_id()
    atomic_write(Path(log_dir) / DIR_ID_FILE, f"{new}\n".encode())
    return new


def _new_dir_id() -> str:
    """A random id, never a reserved one nor one starting with ``-`` (Kafka's ``Uuid.randomUuid``
    avoids those, which a command line would take for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if is_dir_id(text) and not text.startswith("-"):
            return text
