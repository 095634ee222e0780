"""Dagster definitions: one asset per topic partitioned by Kafka partition, sensors, schedules and checks.

Dagster decides *when* a log is cleaned; the Spark jobs do the work.
"""
