"""Shared fixtures: the broker-written logs beside the repository, and fresh log dirs."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REAL_KAFKA = REPO.parent / "shared" / "fixtures" / "real-kafka"
SKIP_REASON = "../shared/fixtures/real-kafka is absent: broker-written fixtures live beside the repository, not in it"


@pytest.fixture
def fixtures_root() -> Path:
    return REAL_KAFKA


@pytest.fixture
def real_kafka() -> Path:
    if not REAL_KAFKA.is_dir():
        pytest.skip(SKIP_REASON)
    return REAL_KAFKA
