"""The ``kafka-log`` data source where Spark 4 looks for Python data sources by itself.

At a session's first data-source lookup Spark runs ``pyspark.sql.worker.lookup_data_sources`` in
a Python worker: it imports every top-level module on the worker's Python path (``pkgutil.iter_modules``)
whose name starts with ``pyspark_`` and registers its ``DefaultSource`` under ``DefaultSource.name()``.
So ``spark.read.format("kafka-log")`` works in a plain ``SparkSession``; the class is
:class:`spark_jobs.datasource.KafkaLogDataSource`, the one ``build_spark_session`` registers too.
"""

from spark_jobs.datasource import KafkaLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
