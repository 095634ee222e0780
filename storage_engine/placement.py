"""Where partitions and their replicas go: brokers (rack-aware or not) and log directories.

Seed 004 describes Kafka's rules (``AdminUtils.assignReplicasToBrokers``, ``LogManager``):

* spread replicas evenly over brokers, never two replicas of a partition on one broker;
* leaders go round-robin from a random start; followers sit at a shift after the leader that
  grows each time the partitions wrap around the broker list, so replica sets do not repeat;
* with racks, the broker list is first interleaved by rack (rack1 b0, rack2 b2, rack3 b4, rack1
  b1, ...), and a follower is skipped while its rack (or the broker) already holds a replica of
  the partition and other racks remain;
* a new partition's directory is the log dir holding the fewest partitions.

Everything is a pure function; randomness only comes from an explicit ``seed`` or
``start_index``, so a placement can be reproduced and tested.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from .errors import ConfigError, LogError


@dataclass(frozen=True)
class BrokerMetadata:
    """A broker id and its rack (``broker.rack``), if any."""

    id: int
    rack: str | None = None


def _replica_index(first: int, shift: int, replica: int, n: int) -> int:
    """Position of a follower: 1..n-1 steps after the leader, never the leader itself."""
    step = 1 + (shift + replica) % (n - 1)
    return (first + step) % n


def rack_alternated_broker_list(brokers: Sequence[BrokerMetadata]) -> list[int]:
    """Broker ids taken from each rack in turn (racks and ids sorted), so neighbours differ in rack.

    Racks with fewer brokers simply drop out of the rotation once exhausted.
    """
    by_rack: dict[str, list[int]] = {}
    for b in brokers:
        if b.rack is None:
            raise ConfigError("broker.rack", None, f"broker {b.id} has no rack")
        by_rack.setdefault(b.rack, []).append(b.id)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(brokers):
        for queue in queues:
            if depth < len(queue):
                result.append(queue[depth])
        depth += 1
    return result


def _check_inputs(brokers: Sequence[BrokerMetadata], partitions: int, rf: int) -> None:
    if partitions <= 0:
        raise ConfigError("partitions", partitions, "Number of partitions must be larger than 0.")
    if rf <= 0:
        raise ConfigError("replication.factor", rf, "Replication factor must be larger than 0.")
    if rf > len(brokers):
        raise ConfigError(
            "replication.factor",
            rf,
            f"Replication factor: {rf} larger than available brokers: {len(brokers)}.",
        )
    ids = [b.id for b in brokers]
    if len(set(ids)) != len(ids):
        raise ConfigError("brokers", ids, "Broker ids must be unique.")
    with_rack = sum(1 for b in brokers if b.rack is not None)
    if 0 < with_rack < len(brokers):
        missing = sorted(b.id for b in brokers if b.rack is None)
        raise ConfigError(
            "broker.rack",
            missing,
            "Not all brokers have rack information for replica rack aware assignment.",
        )


def assign_replicas(
    brokers: Sequence[BrokerMetadata],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    start_partition_id: int = -1,
    seed: int | None = None,
) -> dict[int, list[int]]:
    """Replica lists (leader first) for partitions ``start_partition_id..`` (0 if negative).

    ``start_index`` fixes both the first leader's position and the initial follower shift (as
    Kafka's ``fixedStartIndex`` does); otherwise both are drawn from ``random.Random(seed)``.
    Rack-aware placement applies when every broker has a rack.
    """
    _check_inputs(brokers, partitions, replication_factor)
    if start_index is not None and start_index < 0:
        raise ConfigError("start_index", start_index, "Value must be at least 0")
    rack_aware = all(b.rack is not None for b in brokers)
    if rack_aware:
        order = rack_alternated_broker_list(brokers)
        rack_of = {b.id: b.rack for b in brokers}
    else:
        order = sorted(b.id for b in brokers)
        rack_of = {}
    n = len(order)
    rng = random.Random(seed)
    first_start = start_index if start_index is not None else rng.randrange(n)
    shift = start_index if start_index is not None else rng.randrange(n)
    num_racks = len(set(rack_of.values()))

    result: dict[int, list[int]] = {}
    partition = max(0, start_partition_id)
    for _ in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + first_start) % n
        leader = order[first]
        if rack_aware:
            replicas = _rack_aware_followers(order, rack_of, num_racks, first, shift, replication_factor)
        else:
            replicas = [leader] + [
                order[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
        result[partition] = replicas
        partition += 1
    return result


def _rack_aware_followers(
    order: list[int],
    rack_of: Mapping[int, str | None],
    num_racks: int,
    first: int,
    shift: int,
    rf: int,
) -> list[int]:
    """Leader plus followers, walking the rack-alternated list and skipping covered racks/brokers.

    A candidate is taken when its rack holds no replica yet (or every rack already does) and
    the broker holds none (or every broker already does). The shift is scaled by the rack
    count so successive wraps move followers to a different rack position.
    """
    n = len(order)
    leader = order[first]
    replicas = [leader]
    racks = {rack_of[leader]}
    held = {leader}
    k = 0
    while len(replicas) < rf:
        candidate = order[_replica_index(first, shift * num_racks, k, n)]
        rack = rack_of[candidate]
        rack_ok = rack not in racks or len(racks) == num_racks
        broker_ok = candidate not in held or len(held) == n
        if rack_ok and broker_ok:
            replicas.append(candidate)
            racks.add(rack)
            held.add(candidate)
        k += 1
        if k > n * n:  # cannot happen with rf <= n; guards against an endless loop
            raise LogError(f"could not place {rf} replicas on {n} brokers")
    return replicas


def choose_log_dir(partition_counts: Mapping[str, int]) -> str:
    """The log dir holding the fewest partitions; ties go to the earliest in the given order."""
    if not partition_counts:
        raise LogError("no log directory to place a partition in")
    best = None
    for log_dir, count in partition_counts.items():
        if best is None or count < partition_counts[best]:
            best = log_dir
    return best  # type: ignore[return-value]
