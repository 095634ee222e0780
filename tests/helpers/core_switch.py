"""Run a test under a chosen record core (issue 36): the compiled one or the reference."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pytest

from storage_engine import native

CORES = ("compiled", "reference")


@contextmanager
def using(kind: str) -> Iterator[None]:
    """``native.use(kind)`` for the block, then the previous choice again. Skips the test when
    ``kind`` is the compiled core and it is not built here."""
    if kind == "compiled" and native._MODULE is None:
        pytest.skip("the compiled core is not built here (no Rust toolchain at install)")
    prev = native.status().requested
    native.use(kind)
    try:
        yield
    finally:
        native.use(prev)


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """What the differential tests compare of one call: ``("ok", result)``, ``("arrow", (schema,
    rows))`` for an Arrow record batch, or ``(exception class name, message)``: the class and
    message of an error are part of the contract."""
    try:
        result = fn()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    if isinstance(result, pa.RecordBatch):
        return "arrow", (result.schema, result.to_pylist())
    return "ok", result
