"""A partition's history: its stored versions, which of them are still retained, and which can
still be read.

Every change of a partition's remote tier is a numbered version (``version.py``). A version
superseded by the next stays *retained* for ``logplat.remote.version.retention.ms`` after the
next one's commit (Delta Lake's ``delta.deletedFileRetentionDuration`` plays the same part for
time travel); the latest is always retained, and so is a version a live pin holds
(``pins.py``). The sweep deletes only what no retained version names, so a retained version is
readable and restorable; once it is not retained its objects may go, and it is then listed as
no longer readable until the sweep deletes the version object too.

:func:`read_history` is the one gathering the sweep, restore and ``logctl versions`` share: one
LIST of ``pins/``, then of ``versions/`` (a GET each), then of ``data/``, in that order (why the
order matters: ``pins.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .names import DATA
from .partition import RemotePartition
from .pins import Pin, read_pins
from .store import ObjectInfo
from .version import PartitionVersion


@dataclass(frozen=True)
class History:
    """What one gathering found: the pins, every stored version (ascending) and the data
    objects by name (relative to the partition's folder)."""

    pins: tuple[Pin, ...]
    versions: tuple[PartitionVersion, ...]
    data: dict[str, ObjectInfo]

    @property
    def latest(self) -> PartitionVersion | None:
        return self.versions[-1] if self.versions else None

    def superseded_ms(self, index: int) -> int | None:
        """When ``versions[index]`` was superseded (the next stored version's commit); None for
        the latest."""
        return self.versions[index + 1].committed_ms if index + 1 < len(self.versions) else None

    def pinned(self, now_ms_wall: int) -> set[int]:
        """The versions a pin that has not expired holds."""
        return {p.version for p in self.pins if p.expires_ms > now_ms_wall}

    def retained(self, now_ms_wall: int, retention_ms: int) -> set[int]:
        """The versions the sweep must keep whole (see the module docstring)."""
        return retained_versions(self.versions, self.pinned(now_ms_wall), now_ms_wall, retention_ms)

    def readable(self, version: PartitionVersion) -> bool:
        """Whether every object ``version`` names was in the listing."""
        return all(name in self.data for name in version.objects)


def retained_versions(versions: Sequence[PartitionVersion], pinned: set[int], now_ms_wall: int,
                      retention_ms: int) -> set[int]:
    """The latest version, every pinned one, and every one superseded less than
    ``retention_ms`` before ``now_ms_wall`` (``versions`` ascending)."""
    out = set()
    for i, v in enumerate(versions):
        superseded = versions[i + 1].committed_ms if i + 1 < len(versions) else None
        if superseded is None or v.version in pinned or now_ms_wall - superseded < retention_ms:
            out.add(v.version)
    return out


def read_history(rp: RemotePartition) -> History:
    """Pins, versions and data objects of ``rp`` (see the module docstring); any listing,
    reading or parsing error is raised (a ``RemoteStorageError``)."""
    pins = read_pins(rp)
    versions = tuple(rp.read_version(n) for n in rp.version_numbers())
    data = {info.name[len(rp.prefix):]: info for info in rp.store.list(rp.name(DATA))}
    return History(tuple(pins), versions, data)


@dataclass(frozen=True)
class VersionRow:
    """One version as ``logctl versions`` lists it."""

    version: int
    committed_ms: int
    operation: str
    writer: str
    segments: int
    size_bytes: int
    log_start_offset: int
    end_offset: int
    cleaner_checkpoint: int | None
    summary: dict[str, Any]
    superseded_ms: int | None
    retained: bool
    pinned: bool
    readable: bool

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def version_rows(history: History, *, now_ms_wall: int, retention_ms: int) -> list[VersionRow]:
    """The rows of every stored version, oldest first."""
    retained = history.retained(now_ms_wall, retention_ms)
    pinned = history.pinned(now_ms_wall)
    return [VersionRow(v.version, v.committed_ms, v.operation, v.writer, len(v.segments), v.size_bytes,
                       v.log_start_offset, v.end_offset, v.cleaner_checkpoint, v.summary, history.superseded_ms(i),
                       v.version in retained, v.version in pinned, history.readable(v))
            for i, v in enumerate(history.versions)]
