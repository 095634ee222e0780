"""Errors raised by the Spark jobs (the engine's own errors pass through unchanged)."""

from __future__ import annotations

from storage_engine.errors import LogError


class SparkJobError(LogError):
    """A Spark job could not run or finish."""


class SparkSetupError(SparkJobError):
    """Spark cannot start here: Java missing or too old, or a bad master or setting."""


class DataSourceOptionError(SparkJobError):
    """A ``kafka-log`` read option is malformed or names something that does not exist."""
