"""Fixtures of the platform tests: a real, throwaway Dagster instance."""

from __future__ import annotations

import dagster as dg
import pytest


@pytest.fixture
def instance():
    """A temporary Dagster instance (``dg.instance_for_test``), removed after the test."""
    with dg.instance_for_test() as inst:
        yield inst
