"""The log state sensor's cursor: which state of each partition it last recorded.

The sensor records an ``AssetObservation`` of a partition only when its state changed since the
observation it last recorded, so the event log does not grow with every tick. The cursor holds a
12-digit digest of each recorded state (``PartitionState.observation_digest``), by topic and
partition key, as compact JSON in the sensor's cursor. It holds too, for ``topic_health``, the
storage id of the last check evaluation the sensor read (``health_after``) and the digest of
each topic's last recorded rollup (``TopicHealth.digest``), so a rollup is recorded only when
it changed.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from .log_state import PartitionState, TopicPartition
from .partition_keys import partition_key


@dataclass
class ObservationCursor:
    """The digest of each partition's last recorded state, by topic (JSON in the sensor cursor)."""

    seen: dict[str, dict[str, str]] = field(default_factory=dict)
    #: the storage id of the last check evaluation read; None: not read yet (roll up every topic)
    health_after: int | None = None
    #: the digest of each topic's last recorded ``topic_health``
    rollups: dict[str, str] = field(default_factory=dict)
    #: topics with new ``log_health`` results whose rollup a tick had no room for: the next tick's
    rollups_due: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str | None) -> ObservationCursor:
        if not text:
            return cls()
        try:
            body = json.loads(text)
            after = body.get("health_after")
            return cls({t: dict(parts) for t, parts in body.get("seen", {}).items()},
                       int(after) if after is not None else None, dict(body.get("rollups", {})),
                       [str(t) for t in body.get("rollups_due", [])])
        except (ValueError, AttributeError, TypeError):
            return cls()  # an unreadable cursor only costs one round of observations and rollups

    def changed(self, state: PartitionState) -> bool:
        return self.seen.get(state.topic, {}).get(partition_key(state.partition)) != state.observation_digest()

    def record(self, state: PartitionState) -> None:
        self.seen.setdefault(state.topic, {})[partition_key(state.partition)] = state.observation_digest()

    def changed_unreadable(self, tp: TopicPartition, why: str) -> bool:
        """Whether a partition that cannot be read was last recorded with another reason (or as
        readable)."""
        return self.seen.get(tp[0], {}).get(partition_key(tp[1])) != _reason_digest(why)

    def record_unreadable(self, tp: TopicPartition, why: str) -> None:
        self.seen.setdefault(tp[0], {})[partition_key(tp[1])] = _reason_digest(why)

    def keep_only(self, present: Iterable[TopicPartition]) -> None:
        """Forget partitions that are gone, so the cursor never grows past the log dirs."""
        alive: dict[str, set[str]] = defaultdict(set)
        for topic, partition in present:
            alive[topic].add(partition_key(partition))
        self.seen = {t: {k: v for k, v in parts.items() if k in alive[t]} for t, parts in self.seen.items() if t in alive}
        self.rollups = {t: d for t, d in self.rollups.items() if t in alive}
        self.rollups_due = [t for t in self.rollups_due if t in alive]

    def rollup_changed(self, topic: str, digest: str) -> bool:
        return self.rollups.get(topic) != digest

    def record_rollup(self, topic: str, digest: str) -> None:
        self.rollups[topic] = digest

    def dump(self) -> str:
        return json.dumps({"v": 1, "seen": self.seen, "health_after": self.health_after, "rollups": self.rollups,
                           "rollups_due": self.rollups_due}, separators=(",", ":"), sort_keys=True)


def _reason_digest(why: str) -> str:
    """A digest of why a partition cannot be read, never equal to a state's (those are digits)."""
    return "x" + hashlib.sha256(why.encode()).hexdigest()[:11]
