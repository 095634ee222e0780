"""Kafka's ``ConfigDef`` value types and validators: how every config value, topic-level or
broker-level, is parsed and range-checked, with Kafka's error texts. Numbers the whole engine
bounds itself by live here too (the latest accepted clock; Java's int and long ranges come from
``storage_engine.limits``)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from ..limits import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN

MS_PER_MINUTE = 60 * 1000
#: the latest clock any command accepts (9999-12-31T23:59:59.999Z): a record timestamp or ``now_ms``
#: past it is a typo, and it keeps every sum of a clock and a Kafka duration inside a long
MAX_TIMESTAMP_MS = 253_402_300_799_999
MS_PER_HOUR = 60 * MS_PER_MINUTE

# --------------------------------------------------------------------------- parsing

_INTEGER = re.compile(r"[+-]?[0-9]+")
_MAX_INTEGER_CHARS = 64  # longer is out of any range (and past Python's own limit beyond 4300 digits)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_LIST_SPLIT = re.compile(r"\s*,\s*")

_TYPE_RANGE = {"INT": (INT_MIN, INT_MAX), "LONG": (LONG_MIN, LONG_MAX)}


def _parse_integer(key: str, value: object, type_name: str) -> int:
    lo, hi = _TYPE_RANGE[type_name]
    if isinstance(value, bool):
        raise ConfigError(key, value, f"Not a number of type {type_name}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _INTEGER.fullmatch(value.strip()) and len(value.strip()) <= _MAX_INTEGER_CHARS:
        number = int(value.strip())
    else:
        raise ConfigError(key, value, f"Not a number of type {type_name}")
    if not lo <= number <= hi:
        raise ConfigError(key, value, f"Not a number of type {type_name}")
    return number


def _parse_double(key: str, value: object) -> float:
    if isinstance(value, bool):
        raise ConfigError(key, value, "Not a number of type DOUBLE")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        number = float(value.strip())
    else:
        raise ConfigError(key, value, "Not a number of type DOUBLE")
    if math.isnan(number):
        # Kafka lets NaN through its range checks (every comparison is false); we do not.
        raise ConfigError(key, value, "Not a number of type DOUBLE")
    return number


def _parse_boolean(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return text == "true"
    raise ConfigError(key, value, "Expected value to be either true or false")


def _parse_string(key: str, value: object) -> str:
    """Kafka's ``ConfigDef.parseType`` STRING: the value trimmed. It must be UTF-8 text: a
    command line's undecodable bytes arrive as lone surrogates, which no UTF-8 file could store."""
    if not isinstance(value, str):
        raise ConfigError(key, value, "Expected value to be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigError(key, value, f"Value must be UTF-8 text ({exc.reason} at character {exc.start})") from None
    return value.strip()


def _parse_list(key: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        text = value.strip()
        return () if text == "" else tuple(_LIST_SPLIT.split(text))
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value)
    raise ConfigError(key, value, "Expected a comma-separated list")


_PARSERS: dict[str, Callable[[str, object], Any]] = {
    "INT": lambda k, v: _parse_integer(k, v, "INT"),
    "LONG": lambda k, v: _parse_integer(k, v, "LONG"),
    "DOUBLE": _parse_double,
    "BOOLEAN": _parse_boolean,
    "STRING": _parse_string,
    "LIST": _parse_list,
}

# --------------------------------------------------------------------------- validators
# A validator takes (key, raw value for the message, parsed value) and raises ConfigError.

Validator = Callable[[str, object, Any], None]


def parse_value(type_name: str, key: str, raw: object, validator: Validator | None = None) -> Any:
    """``raw`` parsed as Kafka's ``ConfigDef.Type`` ``type_name`` (INT, LONG, DOUBLE, BOOLEAN,
    STRING, LIST) and checked by ``validator``; an error names ``key`` and ``raw``."""
    value = _PARSERS[type_name](key, raw)
    if validator is not None:
        validator(key, raw, value)
    return value



def _fmt(n: float) -> str:
    return str(int(n)) if float(n).is_integer() else str(n)


def at_least(minimum: float) -> Validator:
    def check(key: str, raw: object, value: Any) -> None:
        if value < minimum:
            raise ConfigError(key, raw, f"Value must be at least {_fmt(minimum)}")

    return check


def between(minimum: float, maximum: float) -> Validator:
    def check(key: str, raw: object, value: Any) -> None:
        if value < minimum:
            raise ConfigError(key, raw, f"Value must be at least {_fmt(minimum)}")
        if value > maximum:
            raise ConfigError(key, raw, f"Value must be no more than {_fmt(maximum)}")

    return check


def one_of(*choices: str) -> Validator:
    def check(key: str, raw: object, value: Any) -> None:
        if value not in choices:
            raise ConfigError(key, raw, f"String must be one of: {', '.join(choices)}")

    return check


def no_empty_items(key: str, raw: object, value: Any) -> None:
    """Kafka 4's ``ConfigDef.ValidList``: a list may be empty (KIP-1161's empty
    ``cleanup.policy``), an item of it may not (``compact,`` is a typo, not two policies)."""
    if any(item == "" for item in value):
        raise ConfigError(key, raw, "", message=f"Configuration '{key}' values must not be empty.")


def each_one_of(*choices: str) -> Validator:
    def check(key: str, raw: object, value: Any) -> None:
        no_empty_items(key, raw, value)
        for item in value:
            if item not in choices:
                raise ConfigError(key, raw, f"String must be one of: {', '.join(choices)}")

    return check

