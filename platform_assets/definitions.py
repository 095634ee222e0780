"""The code location: ``platform_assets.definitions:defs`` (see ``workspace.yaml``).

Built from the environment when it loads (``settings.py``): one asset, job and sweep schedule
per topic found in the log dirs, the cleaning report across them (when there are any), the sensors, the jobs
that pause and resume cleaning, where tiering can happen the remote sweep's job and schedule
(``defs/remote_sweep.py``), and the resources. Each topic asset carries a reference to the code that cleans it
(``with_source_code_references``, a *beta* API of Dagster 1.13 whose warning is silenced here,
where the choice is made: the UI's "Definition" tab links to it).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import dagster as dg

from .defs.assets import build_log_asset, build_log_checks, build_report_asset
from .defs.jobs import build_cleanup_job
from .defs.pause import pause_cleaning, resume_cleaning
from .defs.remote_sweep import build_remote_sweep
from .defs.resources import build_resources
from .defs.schedules import build_sweep_schedules
from .defs.sensors import build_sensors
from .logic.catalog import discover_topics
from .logic.settings import PlatformSettings
from .logic.tiering import remote_tier_in_use


def _with_code_references(assets: Sequence[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return list(dg.with_source_code_references(assets))  # type: ignore[arg-type]


def build_definitions(settings: PlatformSettings | None = None) -> dg.Definitions:
    settings = settings or PlatformSettings.from_env()
    catalog = discover_topics(settings.log_dirs, settings.broker_props)
    topics = catalog.topics
    jobs = {t.name: build_cleanup_job(t) for t in topics}
    tiering = bool(topics) and remote_tier_in_use(t.config for t in topics)
    sweep_job, sweep_schedule = build_remote_sweep(topics, settings)
    return dg.Definitions(
        assets=[*_with_code_references([build_log_asset(t, settings.owners) for t in topics]),
                *([build_report_asset(settings.owners)] if topics else [])],
        asset_checks=[build_log_checks(t) for t in topics],
        jobs=[*jobs.values(), pause_cleaning, resume_cleaning, *([sweep_job] if tiering else [])],
        sensors=build_sensors(catalog, jobs, settings),
        schedules=[*build_sweep_schedules(topics, jobs, settings), *([sweep_schedule] if tiering else [])],
        resources=build_resources(settings),
        # Every run is one step (one topic asset): a separate step process would only add its
        # start-up to each run, so the step and its Spark driver run in the run worker itself.
        executor=dg.in_process_executor,
    )


defs = build_definitions()
