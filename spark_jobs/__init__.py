"""PySpark jobs over the storage engine: the ``kafka-log`` data source, compaction and retention.

Spark distributes work whose rules live in ``storage_engine``; nothing here decides what to
keep or delete.
"""
