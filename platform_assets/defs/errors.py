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
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import dagster as dg

from storage_engine.errors import LogError

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
            raise dg.Failure(description=str(exc)) from None

    return run
