"""``python -m storage_engine.tools.logctl``: the engine alone (the ``logctl`` console script
adds the engines installed packages plug in, such as Spark)."""

import sys

from .main import main

sys.exit(main())
