"""The distribution rules the Spark jobs use: task slots from the master, and packing work items
largest first onto the least loaded task."""

from __future__ import annotations

import os
import random

import pytest

from spark_jobs.distribute import contiguous_parts, pack, task_slots


class _Context:
    def __init__(self, master: str, parallelism: int = 8) -> None:
        self.master = master
        self.defaultParallelism = parallelism


class _Session:
    def __init__(self, master: str) -> None:
        self.sparkContext = _Context(master)


@pytest.mark.parametrize("master,slots", [("local", 1), ("local[1]", 1), ("local[2]", 2), ("local[3, 4]", 3),
                                          ("local[*]", os.cpu_count()), ("spark://host:7077", 8)])
def test_task_slots_follow_the_master(master, slots):
    assert task_slots(_Session(master)) == slots


def test_packing_is_largest_first_onto_the_least_loaded_task():
    assert pack([5, 1, 4, 2, 3], lambda x: x, 2) == [[5, 2, 1], [4, 3]]
    assert pack([7], lambda x: x, 4) == [[7]]  # no empty tasks
    assert pack([], lambda x: x, 3) == []


@pytest.mark.parametrize("seed", range(5))
def test_packing_keeps_every_item_and_balances_within_the_largest(seed):
    rnd = random.Random(seed)
    items = [rnd.randrange(1, 1000) for _ in range(rnd.randrange(1, 80))]
    bins = rnd.randrange(1, 9)
    packed = pack(items, lambda x: x, bins)
    assert sorted(x for b in packed for x in b) == sorted(items) and len(packed) <= bins
    loads = [sum(b) for b in packed]
    if len(packed) == bins:  # LPT: no task ends more than the largest item above another
        assert max(loads) - min(loads) <= max(items)


def test_contiguous_parts_cut_where_the_running_total_nears_each_share():
    assert contiguous_parts([128] * 8, 2) == [range(0, 4), range(4, 8)]
    assert contiguous_parts([1, 1, 100, 1], 2) == [range(0, 2), range(2, 4)]
    assert contiguous_parts([5], 3) == [range(0, 1)]  # never an empty part
    assert contiguous_parts([1, 2, 3], 5) == [range(0, 1), range(1, 2), range(2, 3)]
    assert contiguous_parts([], 2) == []


@pytest.mark.parametrize("seed", range(5))
def test_contiguous_parts_keep_order_and_balance_within_the_largest(seed):
    rnd = random.Random(seed)
    sizes = [rnd.randrange(1, 1000) for _ in range(rnd.randrange(1, 60))]
    parts = rnd.randrange(1, 9)
    cut = contiguous_parts(sizes, parts)
    assert [i for r in cut for i in r] == list(range(len(sizes))) and all(cut)
    assert len(cut) == min(parts, len(sizes))
    share = sum(sizes) / len(cut)
    assert all(abs(sum(sizes[i] for i in r) - share) <= 2 * max(sizes) for r in cut)
