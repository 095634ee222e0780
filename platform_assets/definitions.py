"""The code location: ``platform_assets.definitions:defs`` (see ``workspace.yaml``).

Built from the environment when it loads (``settings.py``): one asset, job and sweep schedule
per topic found in the log dirs, the four sensors, and the resources.
"""

from __future__ import annotations

import dagster as dg

from .defs.assets import build_log_asset, build_log_checks
from .defs.jobs import build_cleanup_job
from .defs.resources import build_resources
from .defs.schedules import build_sweep_schedules
from .defs.sensors import build_sensors
from .logic.catalog import discover_topics
from .logic.settings import PlatformSettings


def build_definitions(settings: PlatformSettings | None = None) -> dg.Definitions:
    settings = settings or PlatformSettings.from_env()
    catalog = discover_topics(settings.log_dirs, settings.broker_props)
    topics = catalog.topics
    jobs = {t.name: build_cleanup_job(t) for t in topics}
    return dg.Definitions(
        assets=[build_log_asset(t) for t in topics],
        asset_checks=[build_log_checks(t) for t in topics],
        jobs=list(jobs.values()),
        sensors=build_sensors(catalog, jobs, settings),
        schedules=build_sweep_schedules(topics, jobs, settings),
        resources=build_resources(settings),
        # Every run is one step (one topic asset): a separate step process would only add its
        # start-up to each run, so the step and its Spark driver run in the run worker itself.
        executor=dg.in_process_executor,
    )


defs = build_definitions()
