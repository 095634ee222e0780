"""Replica and log-dir placement (seed 004, Kafka's AdminUtils / LogManager rules)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage_engine.errors import ConfigError, LogError
from storage_engine.placement import (
    BrokerMetadata,
    assign_replicas,
    choose_log_dir,
    rack_alternated_broker_list,
)

# Seed 004: six brokers, rack1 = {0, 1}, rack2 = {2, 3}, rack3 = {4, 5}; 10 partitions, RF 3.
SEED_BROKERS = [BrokerMetadata(i, f"rack{i // 2 + 1}") for i in range(6)]


def _replica_counts(assignment: dict[int, list[int]]) -> Counter[int]:
    return Counter(b for replicas in assignment.values() for b in replicas)


def _leader_counts(assignment: dict[int, list[int]]) -> Counter[int]:
    return Counter(replicas[0] for replicas in assignment.values())


def test_seed_rack_alternated_list() -> None:
    assert rack_alternated_broker_list(SEED_BROKERS) == [0, 2, 4, 1, 3, 5]


def test_rack_alternated_list_uneven_racks() -> None:
    brokers = [BrokerMetadata(0, "a"), BrokerMetadata(1, "a"), BrokerMetadata(2, "a"), BrokerMetadata(3, "b")]
    assert rack_alternated_broker_list(brokers) == [0, 3, 1, 2]
    shuffled = [BrokerMetadata(5, "r2"), BrokerMetadata(1, "r1"), BrokerMetadata(3, "r2"), BrokerMetadata(0, "r1")]
    assert rack_alternated_broker_list(shuffled) == [0, 3, 1, 5]


@pytest.mark.parametrize("start_index", range(6))
def test_seed_example(start_index: int) -> None:
    rack_of = {b.id: b.rack for b in SEED_BROKERS}
    assignment = assign_replicas(SEED_BROKERS, 10, 3, start_index=start_index)
    assert sorted(assignment) == list(range(10))
    for replicas in assignment.values():
        assert len(replicas) == 3
        assert len(set(replicas)) == 3, replicas  # distinct brokers
        assert len({rack_of[b] for b in replicas}) == 3, replicas  # distinct racks
    # leaders spread evenly: 10 leaders on 6 brokers -> 1 or 2 each
    assert set(_leader_counts(assignment).values()) <= {1, 2}
    assert len(_leader_counts(assignment)) == 6
    # 30 replicas on 6 brokers: each within one of 5, as the seed accepts
    counts = _replica_counts(assignment)
    assert len(counts) == 6
    assert all(abs(c - 5) <= 1 for c in counts.values()), counts


def test_even_rack_aware_case_is_perfectly_balanced() -> None:
    assignment = assign_replicas(SEED_BROKERS, 12, 3, start_index=2)
    assert set(_replica_counts(assignment).values()) == {6}
    assert set(_leader_counts(assignment).values()) == {2}


def test_rack_unaware_round_robin() -> None:
    brokers = [BrokerMetadata(i) for i in range(5)]
    assert assign_replicas(brokers, 10, 3, start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],  # wrapped around: followers shift by one more
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_seed_prose_example() -> None:
    # "broker 4 leads partition 0, partition 1's leader is broker 5, partition 2's is broker 0,
    # partition 0's followers are brokers 5 and 0"
    brokers = [BrokerMetadata(i) for i in range(6)]
    assignment = assign_replicas(brokers, 10, 3, start_index=4)
    assert [assignment[p][0] for p in range(6)] == [4, 5, 0, 1, 2, 3]
    # Kafka fixes the first follower shift to the start index too, so partition 0's followers
    # are not simply the next two brokers of the prose; they are still two other brokers.
    assert len(set(assignment[0])) == 3


def test_start_partition_id() -> None:
    brokers = [BrokerMetadata(i) for i in range(5)]
    full = assign_replicas(brokers, 10, 3, start_index=0)
    tail = assign_replicas(brokers, 4, 3, start_index=0, start_partition_id=6)
    assert sorted(tail) == [6, 7, 8, 9]
    # leaders continue the round robin; like Kafka, the follower shift only grows on wraps
    # inside this call, so followers need not match a one-shot assignment
    assert [tail[p][0] for p in tail] == [full[p][0] for p in range(6, 10)]
    assert tail[6] == [1, 2, 3]


def test_deterministic_given_seed() -> None:
    brokers = [BrokerMetadata(i) for i in range(7)]
    a = assign_replicas(brokers, 20, 3, seed=42)
    assert a == assign_replicas(brokers, 20, 3, seed=42)
    seeds = {tuple(map(tuple, assign_replicas(brokers, 20, 3, seed=s).values())) for s in range(10)}
    assert len(seeds) > 1  # the start really is random without a fixed seed


def test_broker_order_does_not_matter() -> None:
    brokers = [BrokerMetadata(i, f"r{i % 3}") for i in range(9)]
    reversed_brokers = list(reversed(brokers))
    assert assign_replicas(brokers, 9, 3, start_index=1) == assign_replicas(reversed_brokers, 9, 3, start_index=1)


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "needle"),
    [
        ([BrokerMetadata(0), BrokerMetadata(1)], 0, 1, "partitions must be larger than 0"),
        ([BrokerMetadata(0), BrokerMetadata(1)], 3, 0, "Replication factor must be larger than 0"),
        ([BrokerMetadata(0), BrokerMetadata(1)], 3, 3, "larger than available brokers: 2"),
        ([], 1, 1, "larger than available brokers: 0"),
        ([BrokerMetadata(0, "a"), BrokerMetadata(1)], 3, 2, "Not all brokers have rack information"),
        ([BrokerMetadata(0), BrokerMetadata(0)], 3, 1, "unique"),
    ],
)
def test_errors(brokers: list[BrokerMetadata], partitions: int, rf: int, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        assign_replicas(brokers, partitions, rf, start_index=0)
    assert needle in str(info.value)
    assert isinstance(info.value, LogError)


def test_negative_start_index_rejected() -> None:
    with pytest.raises(ConfigError):
        assign_replicas([BrokerMetadata(0)], 1, 1, start_index=-1)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[BrokerMetadata], int, int, int]:
    n = draw(st.integers(min_value=1, max_value=12))
    ids = draw(st.lists(st.integers(min_value=0, max_value=1000), min_size=n, max_size=n, unique=True))
    racked = draw(st.booleans())
    if racked:
        racks = draw(st.integers(min_value=1, max_value=4))
        brokers = [BrokerMetadata(i, f"rack{draw(st.integers(0, racks - 1))}") for i in ids]
    else:
        brokers = [BrokerMetadata(i) for i in ids]
    rf = draw(st.integers(min_value=1, max_value=n))
    partitions = draw(st.integers(min_value=1, max_value=40))
    start = draw(st.integers(min_value=0, max_value=n - 1))
    return brokers, partitions, rf, start


@given(clusters())
def test_property_distinct_brokers_and_racks(cluster: tuple[list[BrokerMetadata], int, int, int]) -> None:
    brokers, partitions, rf, start = cluster
    assignment = assign_replicas(brokers, partitions, rf, start_index=start)
    ids = {b.id for b in brokers}
    rack_of = {b.id: b.rack for b in brokers}
    racks = {b.rack for b in brokers}
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= ids
        if all(r is not None for r in racks):
            # as many racks as possible are covered
            assert len({rack_of[b] for b in replicas}) == min(rf, len(racks))


@given(clusters())
def test_property_leaders_round_robin(cluster: tuple[list[BrokerMetadata], int, int, int]) -> None:
    brokers, partitions, rf, start = cluster
    assignment = assign_replicas(brokers, partitions, rf, start_index=start)
    leaders = _leader_counts(assignment)
    n = len(brokers)
    assert max(leaders.values()) - min(leaders.get(b.id, 0) for b in brokers) <= 1
    assert sum(leaders.values()) == partitions and len(leaders) == min(n, partitions)


@given(
    st.integers(min_value=2, max_value=10),
    st.integers(min_value=1, max_value=5),
    st.integers(min_value=0, max_value=9),
)
def test_property_rack_unaware_full_rounds_are_balanced(n: int, rounds: int, start: int) -> None:
    brokers = [BrokerMetadata(i) for i in range(n)]
    rf = min(3, n)
    assignment = assign_replicas(brokers, n * rounds, rf, start_index=start % n)
    assert set(_replica_counts(assignment).values()) == {rf * rounds}


def test_choose_log_dir() -> None:
    assert choose_log_dir({"/a": 3, "/b": 1, "/c": 2}) == "/b"
    assert choose_log_dir({"/a": 1, "/b": 1, "/c": 2}) == "/a"  # tie: first given
    assert choose_log_dir({"/c": 0, "/a": 0}) == "/c"
    with pytest.raises(LogError):
        choose_log_dir({})


@given(st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=8))
def test_property_choose_log_dir(counts: list[int]) -> None:
    dirs = {f"/d{i}": c for i, c in enumerate(counts)}
    chosen = choose_log_dir(dirs)
    assert dirs[chosen] == min(counts)
    assert chosen == f"/d{counts.index(min(counts))}"
