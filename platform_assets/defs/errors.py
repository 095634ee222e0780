"""The engine's refusals (``LogError``), as Dagster shows them: the platform's sentence first.

Dagster wraps any other exception a sensor, schedule or op raises in its own error ("Error
occurred during the execution of evaluation_fn for sensor ...", "Error occurred while executing
op ..."), which the UI shows first, ours only as its cause further down. A ``DagsterError`` passes
its error boundaries as it is, and a ``dg.Failure`` is a run's intended failure, whose
description the run page shows; so an engine refusal is re-raised as one of these, with the
engine's sentence as its message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import dagster as dg

from storage_engine.errors import LogError

from ..logic.cleaning_failures import PERMANENT, error_class, failure_kind

T = TypeVar("T")


class PlatformError(dg.DagsterError):
    """A sensor's or schedule's tick failed on an engine refusal; the message is the engine's."""


def tick_refusals_first(evaluate: Callable[..., T]) -> Callable[..., T]:
    """A sensor's or schedule's evaluation function whose engine refusals fail the tick as a
    ``PlatformError`` (the tick still fails, naming what is wrong, on every evaluation)."""

    @functools.wraps(evaluate)
    def evaluation(*args: Any, **kwargs: Any) -> T:
        try:
            return evaluate(*args, **kwargs)
        except LogError as exc:
            raise PlatformError(str(exc)) from None

    return evaluation


def run_refusals_first(body: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    """An op body (a generator) whose engine refusals fail the step as a ``dg.Failure``."""

    @functools.wraps(body)
    def run(*args: Any, **kwargs: Any) -> Iterator[Any]:
        try:
            yield from body(*args, **kwargs)
        except LogError as exc:
            # no step retry for bytes that are bad: a retry would read them again
            raise dg.Failure(description=str(exc),
                             allow_retries=failure_kind(type(exc).__name__) != PERMANENT) from None

    return run


def cleaning_failure(topic: str, failed: Mapping[int, str]) -> dg.Failure:
    """The failure of a run whose cleaning failed on ``failed`` (partition -> the engine's
    one-line reason): the first partition's reason opens the description, which the run page and
    the partition's "failed" banner show first; every partition's reason is in the metadata. An
    expected data error, so no retry when every failure is permanent for its state (a retry
    would read the same bytes); a transient one (an I/O error) may be retried."""
    ordered = sorted(failed.items())
    first, why = ordered[0]
    kinds = {failure_kind(error_class(reason)) for _, reason in ordered}
    more = f"; and {len(ordered) - 1} more partition(s)" if len(ordered) > 1 else ""
    after = ("left by the sensors and sweeps until the log or its config changes" if kinds == {PERMANENT}
             else "retried by the sensors and sweeps after a backoff")
    return dg.Failure(
        description=f"partition {first} of {topic}: {why}{more} (nothing of it was swapped; {after})",
        metadata={"failed_partitions": dg.MetadataValue.md("\n".join(f"* partition {p}: {r}" for p, r in ordered)),
                  "error": why, "kind": ", ".join(sorted(kinds))},
        allow_retries=kinds != {PERMANENT},
    )
