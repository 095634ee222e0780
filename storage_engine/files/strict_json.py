"""JSON objects read as strictly as command-line input: a field named twice is refused.

Python's ``json`` keeps the last of two equal field names without a word, so ``{"retention.ms":
"604800000", "retention.ms": "1"}`` would quietly mean a retention of one millisecond. Every JSON
the engine reads from a user or from disk (``produce``'s lines, topic metadata files) parses
its objects through :func:`unique_fields`.
"""

from __future__ import annotations

import json
from typing import Any


class DuplicateFieldError(ValueError):
    """A JSON object names one field twice."""


def unique_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: the object, unless a field name repeats."""
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise DuplicateFieldError(f"field {name!r} appears more than once")
        out[name] = value
    return out


def loads_strict(data: bytes | str) -> Any:
    """``data`` (UTF-8 when bytes) parsed with :func:`unique_fields`; a one-line ``ValueError``
    for anything else: bad UTF-8, bad JSON, a field named twice, or nesting deeper than
    Python's decoder recurses (its ``RecursionError`` is no ``ValueError``, and would otherwise
    reach the user as a traceback)."""
    try:
        return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data, object_pairs_hook=unique_fields)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None
