"""A tiering run: the materialization of a tiered topic's partitions with ``operation: tier``.

A tiered topic (``remote.storage.enable``) is an asset like any other; ``tiering_sensor``
(``sensors.py``) asks for these runs from the cheap stats (``logic/tiering.py``), through the
topic's cleanup job, so they share its run queue limit and concurrency pool: a tiering run never
overlaps a compaction or retention run of the same topic. Each partition goes through the
engine's tiering (``storage_engine.remote.tier_runs.tier_one``, what ``logctl tier`` runs for
each partition: copy the rolled segments below the last stable offset, commit the next remote
version, remember it locally, release the local copies past ``local.retention.*``), one
partition at a time on the run's one object store, each with its own request counts.

Every partition is materialized with the log after the run, the version it committed (or the
latest, when there was nothing to copy), what it copied and released, and its requests by type
and bytes (``metadata.tier_metadata``). A partition whose tiering failed is not materialized and
fails the run, as a failed cleaning does (``errors.cleaning_failure``); one whose commit lost a
race (``VersionConflictError``) is ``changed``: nothing of it is visible, the sensor sees the new
version at its next tick.

(No ``from __future__ import annotations`` here, as in ``assets.py``.)
"""

import time
from collections.abc import Iterator
from typing import Any

import dagster as dg

from storage_engine.outcomes import FAILED
from storage_engine.remote.access import open_store
from storage_engine.remote.tier_runs import tier_one
from storage_engine.remote.tiering import TierResult

from ..logic.catalog import Topic
from ..logic.cleaning_failures import error_class
from ..logic.log_state import short_hash
from ..logic.metadata import tier_metadata
from ..logic.partition_keys import partition_key
from ..logic.run_tags import start_tags
from ..logic.tiering import every_request_type
from .checks import log_asset_key
from .cleanup import observe_partitions, recover_then_observe, run_partitions, tag_failed
from .errors import cleaning_failure, run_refusals_first
from .resources import LogStoreResource


@run_refusals_first
def tier_partitions(context: dg.AssetExecutionContext, topic: Topic, now_ms: int | None,
                    log_store: LogStoreResource) -> Iterator[Any]:
    """The body of a tiering run (see the module docstring). An unset or unreachable remote
    location refuses the whole run before anything is written (``open_store``)."""
    partitions = run_partitions(context, topic, log_store, whole_topic=False)
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    observed = recover_then_observe(context, log_store, topic.name, partitions, now_ms)
    missing_tags = start_tags(context.run.tags, topic.name, partitions,
                              {p: state.state_hash for p, (state, _) in observed.items()})
    if missing_tags:
        context.instance.add_run_tags(context.run.run_id, missing_tags)
    store = open_store()
    results: dict[int, TierResult] = {}
    requests: dict[int, dict[str, int]] = {}
    with log_store.manager(read_only=False) as manager:
        for p in partitions:
            results[p] = tier_one(manager, topic.name, p, now_ms=now_ms, store=store)
            requests[p] = every_request_type(results[p].requests)
            context.log.info(f"{topic.name}-{p}: {results[p].status}, version {results[p].version}, "
                             f"{len(results[p].uploaded_segments)} segment(s) copied, {requests[p]}")
    after = observe_partitions(log_store, topic.name, partitions, now_ms)
    metadata = {p: tier_metadata(after[p][0], results[p], requests[p]) for p in partitions}
    failed = {p: r.reason or "" for p, r in results.items() if r.status == FAILED}
    versions = {p: short_hash(after[p][0].state_hash, after[p][1]) for p in partitions}
    asset_key = log_asset_key(topic.name)
    if not failed:
        for p in partitions:
            context.add_asset_metadata(metadata[p], partition_key=partition_key(p))
        yield dg.MaterializeResult(asset_key=asset_key, metadata={"now_ms": dg.MetadataValue.timestamp(now_ms / 1000)},
                                   data_version=dg.DataVersion(short_hash(*sorted(versions.items()))))
        return
    for p in partitions:
        if p not in failed:
            context.log_event(dg.AssetMaterialization(asset_key=asset_key, partition=partition_key(p),
                                                      metadata=metadata[p]))
    tag_failed(context, {p: error_class(why) for p, why in failed.items()})
    raise cleaning_failure(topic.name, failed)
