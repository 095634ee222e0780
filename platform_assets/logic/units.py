"""Sizes and durations as a person reads them, for descriptions and text metadata (plotted
metadata stays plain numbers, see ``metadata.py``)."""

from __future__ import annotations

from datetime import UTC, datetime


def size_text(size_bytes: int) -> str:
    """A size as a person reads it: ``912 B``, ``3.4 KB``, ``56.2 MB``, ``1.07 GB`` (decimal units)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.3g} {unit}" if size_bytes < 100 * scale else f"{size_bytes / scale:.0f} {unit}"
    return f"{size_bytes} B"


def binary_size_text(size_bytes: int) -> str:
    """A configured size in the binary units Kafka's defaults are round in: ``1 GiB``
    (``segment.bytes``' 1073741824), ``512 KiB``, ``1.5 MiB``, ``100 B``; exact where it is."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.4g} {unit}"
    return f"{size_bytes} B"


def megabytes(size_bytes: int) -> float:
    """A size in decimal megabytes, to the byte: what plotted size metadata holds (``size_mb``)."""
    return round(size_bytes / 1e6, 6)


def duration_text(seconds: float) -> str:
    """A duration as a person reads it: ``45 s``, ``12 min``, ``3 h``, ``7 d`` (rounded)."""
    for unit, scale in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def iso_time(ms: int) -> str:
    """A Kafka timestamp (ms since the epoch) as UTC ISO 8601 to the second: ``2026-11-23T12:55:00Z``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
