"""Somewhere else to run compaction and retention: ``--engine NAME``.

The engine never imports Spark. An engine is plugged in by the package that provides it, as an
entry point of the group ``logplat.engines`` naming a factory (``spark_jobs.cli:SparkEngine``);
the ``logctl`` console script loads those, and only the one a run asks for, when it asks.
``python -m storage_engine.tools.logctl`` and :func:`~.main.main` in-process run the engine
alone unless given engines; :func:`spark_jobs.cli.main` plugs Spark in explicitly, for a source
tree whose installed metadata does not name the entry point yet.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Protocol

from ..usage import UsageError

if TYPE_CHECKING:
    from ...cleaner import CompactionReport
    from ...logdir.manager import LogManager

ENTRY_POINT_GROUP = "logplat.engines"
ENGINE_NAMES = ("local", "spark")  # ``local``: in this process


class Engine(Protocol):
    """What ``--engine NAME`` runs ``compact`` and ``retention`` with."""

    def compact(self, manager: LogManager, partitions: list[tuple[str, int]] | None, *, force: bool,
                now_ms: int) -> list[CompactionReport]: ...

    def retention(self, manager: LogManager, topic: str | None, *, now_ms: int, dry_run: bool) -> list[dict]: ...

    def stop(self) -> None:
        """Release what the engine started (a SparkSession it built)."""


class Engines:
    """The engines a run may use besides ``local``, each made from its factory on first use and
    stopped by :meth:`stop`; ``missing`` says, in the error for a name it lacks, where one comes
    from."""

    def __init__(self, factories: Mapping[str, Callable[[], Engine]] | None = None,
                 missing: str = "run the `logctl` command") -> None:
        self._factories = dict(factories or {})
        self._made: dict[str, Engine] = {}
        self._missing = missing

    def get(self, name: str) -> Engine:
        if name not in self._made:
            factory = self._factories.get(name)
            if factory is None:
                raise UsageError(f"--engine {name} is not available in this entry point ({self._missing})")
            self._made[name] = factory()
        return self._made[name]

    def stop(self) -> None:
        for engine in self._made.values():
            engine.stop()
        self._made.clear()


def installed_engines() -> Engines:
    """The engines installed packages register under ``logplat.engines``, loaded on first use."""
    plugged = {point.name: _loader(point) for point in entry_points(group=ENTRY_POINT_GROUP)}
    return Engines(plugged, missing=f"no installed package registers it as a {ENTRY_POINT_GROUP} entry point")


def _loader(point: EntryPoint) -> Callable[[], Engine]:
    return lambda: point.load()()


def add_engine_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", default="local", choices=ENGINE_NAMES,
                        help="where to run: in this process, or as a Spark job ($LOGPLAT_SPARK_MASTER, default local[*])")


def chosen_engine(args: argparse.Namespace) -> Engine | None:
    """The ``--engine`` asked for; None for the local engine."""
    return None if args.engine == "local" else args.engines.get(args.engine)

