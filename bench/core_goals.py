"""The goals table of the compiled record core (issue 36), shared by the ``bench_core_*``
benchmarks and ``bench_core.py``, which prints them together.

Each benchmark measures in one run, beside its baseline (the reference implementation, aiokafka's
compiled codec, a raw copy), and returns :class:`GoalRow` values; the ratio is printed next to
the goal it answers, with whether it is met.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class GoalRow:
    """One line of the table: ``figure`` is ours (compiled) in the row's unit, ``baseline`` what it
    is compared with; ``ratio`` compiled / baseline (or the row's own measure, e.g. bytes per key)
    and ``goal`` the threshold it must reach (``higher_is_better`` says which side)."""

    measure: str
    figure: str
    baseline: str
    ratio: float
    goal: float
    unit: str = "x"
    higher_is_better: bool = True
    note: str = ""

    @property
    def met(self) -> bool:
        return self.ratio >= self.goal if self.higher_is_better else self.ratio <= self.goal

    def goal_text(self) -> str:
        return f"{'>=' if self.higher_is_better else '<='} {self.goal:g}{self.unit}"


def print_table(rows: list[GoalRow], title: str = "compiled record core: goals (issue 36)") -> None:
    """The rows as a Markdown table: measure, ours, baseline, ratio, goal, met."""
    print(f"\n{title}\n")
    print("| measure | compiled | baseline | ratio | goal | met |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        note = f" ({r.note})" if r.note else ""
        print(f"| {r.measure} | {r.figure} | {r.baseline} | {r.ratio:.2f}{r.unit}{note} | {r.goal_text()} | "
              f"{'yes' if r.met else '**no**'} |")


def median_rates(fns: list[Callable[[], int]], rounds: int, budget: float) -> list[float]:
    """Items per second of each function: the median of ``rounds`` interleaved rounds of about
    ``budget`` seconds each."""
    loops = []
    for fn in fns:
        fn()
        t0 = time.perf_counter()
        fn()
        loops.append(max(1, int(budget / max(time.perf_counter() - t0, 1e-6))))
    rates: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            items = 0
            for _ in range(loops[i]):
                items += fn()
            rates[i].append(items / (time.perf_counter() - t0))
    return [statistics.median(r) for r in rates]
