"""The Spark Connect server's Python daemon: PySpark's own, with the worker's heavy imports done
once in the daemon rather than in every worker it forks.

Spark kills a Python worker that has been idle for a minute; the next task forks a new one from
the session's daemon (``pyspark.daemon``), which then imports what an Arrow task needs (pandas,
pyarrow, PySpark's worker and serializers: ~1 s here) before it runs a line of ours. Sensor-driven
runs are usually more than a minute apart, so nearly every run met cold workers. This daemon
imports those once; forked workers inherit them. ``connect_server.py`` sets
``spark.python.daemon.module``.

Two rules keep the forks sound:

* No threads before a fork (PySpark's daemon imports pandas and pyarrow only after forking for
  this reason: they start threads). The settings in :data:`SINGLE_THREADED` stop the two that
  importing them starts here (OpenBLAS's pool through numpy, Arrow's jemalloc background
  thread); ``tests/spark/test_connect.py`` checks that the preloaded daemon has one thread.
* The engine itself is not imported: each session's workers must import the engine its client
  shipped (``session.prepare_session``), never whatever the server's environment holds, so the
  ``spark_jobs`` package that ``python -m`` imported to find this module is forgotten before
  the first fork.
"""

from __future__ import annotations

import importlib
import os
import sys

SINGLE_THREADED = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
}
PRELOADED = ("pandas", "pyarrow", "pyspark.sql.pandas.serializers", "pyspark.worker")


def preload() -> None:
    """Import what every forked worker needs, without starting a thread."""
    for key, value in SINGLE_THREADED.items():
        os.environ.setdefault(key, value)
    for module in PRELOADED:
        importlib.import_module(module)


def forget_own_package() -> None:
    """Drop this module's top-level package (``spark_jobs``, every subpackage with it) from
    ``sys.modules``: a forked worker then imports it afresh from its own path, where the
    session's shipped engine comes first."""
    top = (__package__ or __name__).split(".")[0]
    for name in [n for n in sys.modules if n == top or n.startswith(f"{top}.")]:
        del sys.modules[name]


if __name__ == "__main__":
    preload()
    forget_own_package()
    from pyspark.daemon import manager

    manager()
