"""The Kafka-compatible log store shared by every part of the platform.

Each topic-partition is a Kafka log directory (``<topic>-<n>/`` holding ``.log``, ``.index``
and ``.timeindex`` segment files) byte-compatible with Apache Kafka. This package imports
neither Dagster nor Spark: Spark jobs and Dagster assets call into it, never the reverse.
"""
