"""Pins: a version held for a restore, so the sweep keeps its objects.

A pin is the object ``pins/<version>-<writer>.json`` holding the version, the writer and when
the pin expires (wall clock). The sweep lists ``pins/`` BEFORE ``versions/``: a pin removed
after its holder's commit was seen, or that commit was, so the objects a restore re-names are
never judged unnamed in between. A pin outlives a holder that died only until it expires; the
sweep then deletes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..files.strict_json import loads_strict
from .errors import RemoteMetadataError
from .names import PINS, pin_name, pin_of_name
from .partition import RemotePartition

#: How long a pin holds its version when its holder does not remove it (it died).
PIN_TTL_MS = 3600 * 1000


@dataclass(frozen=True)
class Pin:
    """``version`` held by ``writer`` until ``expires_ms`` (wall clock)."""

    version: int
    writer: str
    expires_ms: int

    @property
    def name(self) -> str:
        return pin_name(self.version, self.writer)

    def encode(self) -> bytes:
        return json.dumps({"version": self.version, "writer": self.writer, "expires_ms": self.expires_ms},
                          sort_keys=True, separators=(",", ":")).encode()


def pin(rp: RemotePartition, version: int, writer: str, *, now_ms_wall: int, ttl_ms: int = PIN_TTL_MS) -> Pin:
    """Hold ``version`` of ``rp`` (a conditional create: the name is the writer's own)."""
    held = Pin(version, writer, now_ms_wall + ttl_ms)
    rp.store.put_new(rp.name(held.name), held.encode())
    return held


def unpin(rp: RemotePartition, held: Pin) -> None:
    rp.store.delete(rp.name(held.name))


def read_pins(rp: RemotePartition) -> list[Pin]:
    """Every pin of ``rp``, expired or not (one LIST, one GET per pin); a name or body that is
    not a pin's is :class:`RemoteMetadataError` (the sweep then deletes nothing)."""
    out = []
    for info in rp.store.list(rp.name(PINS)):
        relative = info.name[len(rp.prefix):]
        number = pin_of_name(relative)
        if number is None:
            raise RemoteMetadataError(f"{rp.store.url}/{info.name}: not a pin object name")
        out.append(_decode(rp.store.get(info.name), number, relative, f"{rp.store.url}/{info.name}"))
    return out


def _decode(data: bytes, number: int, relative: str, where: str) -> Pin:
    try:
        obj = loads_strict(data)
    except ValueError as exc:
        raise RemoteMetadataError(f"{where}: not a pin object: {exc}") from exc
    if not isinstance(obj, dict) or set(obj) != {"version", "writer", "expires_ms"} or not all(
            isinstance(obj[k], int) and not isinstance(obj[k], bool) for k in ("version", "expires_ms")) or not (
            isinstance(obj["writer"], str)):
        raise RemoteMetadataError(f"{where}: not a pin object (fields version, writer, expires_ms)")
    held = Pin(obj["version"], obj["writer"], obj["expires_ms"])
    if held.version != number or held.name != relative:
        raise RemoteMetadataError(f"{where}: holds version {held.version} of writer {held.writer!r}, "
                                  "not what its name says")
    return held
