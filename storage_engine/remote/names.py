"""Object names of the remote tier, and their validation.

Under the location's prefix every partition owns ``<topic>-<partition>/``:

* ``versions/<version, 20 digits>.json``: the partition's numbered metadata versions;
* ``data/<offset, 20 digits>-<writer id>.<log|index|timeindex|txnindex|snapshot>``: immutable
  objects. The offset is the segment's base offset (a producer snapshot's: its offset); the writer id
  (16 hex digits, new for every tiering, cleaning or restore) makes two writers' objects
  distinct, so an upload never replaces what a reader may be using;
* ``pins/<version, 20 digits>-<writer id>.json``: a version held for a restore.

Every name read back from a version is checked against these patterns, exactly as a name from
the command line is (:func:`check_data_name`): a version naming anything else is refused.
"""

from __future__ import annotations

import re
import secrets

from ..files.naming import partition_dir_name
from .errors import RemoteMetadataError

DATA = "data/"
VERSIONS = "versions/"
PINS = "pins/"
_DATA_NAME = re.compile(r"data/(\d{20})-([0-9a-f]{16})\.(log|index|timeindex|txnindex|snapshot)")
_VERSION_NAME = re.compile(r"versions/(\d{20})\.json")
_PIN_NAME = re.compile(r"pins/(\d{20})-([0-9a-f]{16})\.json")


def new_writer_id() -> str:
    """A fresh writer id: 64 random bits, so two writers never pick the same object name."""
    return secrets.token_hex(8)


def partition_prefix(topic: str, partition: int) -> str:
    """A partition's folder in the bucket, named as its local directory is (``<topic>-<n>/``)."""
    return f"{partition_dir_name(topic, partition)}/"


def data_name(offset: int, writer: str, kind: str) -> str:
    name = f"{DATA}{offset:020d}-{writer}.{kind}"
    check_data_name(name, kind)
    return name


def version_name(version: int) -> str:
    return f"{VERSIONS}{version:020d}.json"


def pin_name(version: int, writer: str) -> str:
    return f"{PINS}{version:020d}-{writer}.json"


def check_data_name(name: object, kind: str | None = None) -> str:
    """``name`` if it is a data object name of this partition (relative to its prefix), of
    ``kind`` when given; else :class:`RemoteMetadataError`. No ``..``, no other folder, no
    other partition: the pattern admits only ``data/<20 digits>-<16 hex>.<kind>``."""
    if not isinstance(name, str) or (m := _DATA_NAME.fullmatch(name)) is None:
        raise RemoteMetadataError(f"object name {name!r} is not a data object of this partition "
                                  "(data/<20-digit offset>-<16-hex writer>.<log|index|timeindex|txnindex|snapshot>)")
    if kind is not None and m.group(3) != kind:
        raise RemoteMetadataError(f"object name {name!r} is not a .{kind} object")
    return name


def data_writer(name: str) -> str:
    """The writer id in a data object's name (validated)."""
    m = _DATA_NAME.fullmatch(check_data_name(name))
    assert m is not None
    return m.group(2)


def version_of_name(name: str) -> int | None:
    """The version number of a ``versions/`` object name, None for any other name."""
    m = _VERSION_NAME.fullmatch(name)
    return int(m.group(1)) if m else None


def pin_of_name(name: str) -> int | None:
    """The version a ``pins/`` object name holds, None for any other name."""
    m = _PIN_NAME.fullmatch(name)
    return int(m.group(1)) if m else None
