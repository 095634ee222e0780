"""The Spark Connect server's Python daemon: PySpark's own, with the worker's heavy imports done
once in the daemon rather than in every worker it forks.

Spark kills a Python worker that has been idle for a minute; the next task forks a new one from
the session's daemon (``pyspark.daemon``), which then imports what an Arrow task needs (pandas,
pyarrow, PySpark's worker and serializers: ~1 s here) before it runs a line of ours. Sensor-driven
runs are usually more than a minute apart, so nearly every run met cold workers. This daemon
imports those once; forked workers inherit them. The engine itself is NOT imported here: each
session's workers must import the engine its client shipped (``session.prepare_session``), never
whatever the server's environment holds, so the ``spark_jobs`` package that ``python -m`` imported
to find this module is forgotten before the first fork. ``connect_server.py`` sets
``spark.python.daemon.module``.
"""

import sys

import pandas  # noqa: F401  (imported for the forked workers)
import pyarrow  # noqa: F401
import pyspark.sql.pandas.serializers  # noqa: F401
import pyspark.worker  # noqa: F401
from pyspark.daemon import manager



def forget_own_package() -> None:
    """Drop this module's package from ``sys.modules``: a forked worker then imports it afresh
    from its own path, where the session's shipped engine comes first."""
    for name in [n for n in sys.modules if n == __package__ or n.startswith(f"{__package__}.")]:
        del sys.modules[name]


if __name__ == "__main__":
    forget_own_package()
    manager()
