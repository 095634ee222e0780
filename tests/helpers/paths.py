"""Where the tests find the repository and the broker-written fixtures beside it."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REAL_KAFKA = REPO.parent / "shared" / "fixtures" / "real-kafka"
SKIP_REASON = "../shared/fixtures/real-kafka is absent: broker-written fixtures live beside the repository, not in it"
