"""Dagster definitions, by kind: the topic assets and their checks, the cleanup jobs, the sensors and schedules, the resources, and the partition keys."""
