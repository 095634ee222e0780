"""The log cleaner's broker-level settings (Kafka's ``CleanerConfig``), from the
``log.cleaner.*`` keys: the offset map's memory, the I/O buffers, the throttle, the threads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .values import INT_MAX, Validator, at_least, parse_value

_MIB = 1024 * 1024


@dataclass(frozen=True)
class CleanerConfig:
    """Broker-level knobs of the log cleaner (Kafka's ``CleanerConfig``), shared by every cleaning run."""

    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    io_buffer_size: int = 524288
    io_max_bytes_per_second: float = float("inf")
    backoff_ms: int = 15000
    threads: int = 1
    enable: bool = True

    def __post_init__(self) -> None:
        if self.threads > 0 and self.dedupe_buffer_size / self.threads <= _MIB:
            raise ConfigError(
                "log.cleaner.dedupe.buffer.size",
                self.dedupe_buffer_size,
                "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.",
            )

    @property
    def dedupe_buffer_size_per_thread(self) -> int:
        """Offset-map memory of one cleaner, capped like Kafka's at a Java array's size."""
        return min(self.dedupe_buffer_size // max(self.threads, 1), INT_MAX)

    @property
    def io_buffer_size_per_thread(self) -> int:
        """Read and write buffers each get half of a thread's share."""
        return self.io_buffer_size // max(self.threads, 1) // 2


def _positive_fraction(key: str, raw: object, value: Any) -> None:
    # Stricter than Kafka (no validator there): a map fuller than its slots cannot work.
    if not 0 < value <= 1:
        raise ConfigError(key, raw, "Value must be greater than 0 and at most 1")


def _positive(key: str, raw: object, value: Any) -> None:
    if not value > 0:
        raise ConfigError(key, raw, "Value must be greater than 0")


CLEANER_KEYS: dict[str, tuple[str, str, Validator | None]] = {
    "log.cleaner.dedupe.buffer.size": ("dedupe_buffer_size", "LONG", at_least(0)),
    "log.cleaner.io.buffer.load.factor": ("io_buffer_load_factor", "DOUBLE", _positive_fraction),
    "log.cleaner.io.buffer.size": ("io_buffer_size", "INT", at_least(0)),
    "log.cleaner.io.max.bytes.per.second": ("io_max_bytes_per_second", "DOUBLE", _positive),
    "log.cleaner.backoff.ms": ("backoff_ms", "LONG", at_least(0)),
    "log.cleaner.threads": ("threads", "INT", at_least(0)),
    "log.cleaner.enable": ("enable", "BOOLEAN", None),
}


def build_cleaner_config(broker_props: Mapping[str, object] | None = None) -> CleanerConfig:
    """The cleaner settings from ``log.cleaner.*`` broker keys; other keys are ignored."""
    props = broker_props or {}
    values: dict[str, object] = {}
    for key, (field, type_name, validator) in CLEANER_KEYS.items():
        if key in props:
            values[field] = parse_value(type_name, key, props[key], validator)
    return CleanerConfig(**values)  # type: ignore[arg-type]
