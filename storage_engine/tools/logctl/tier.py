"""``logctl tier``: copy the rolled segments of tiered topics to the remote tier and release the
local copies past ``local.retention.*`` (Kafka's ``RemoteLogManager`` copy task, on demand)."""

from __future__ import annotations

import argparse

from ...errors import LogError
from ...log.segment import now_ms
from ...logdir.manager import LogManager
from ...outcomes import FAILED
from ...remote.access import open_store
from ...remote.tier_runs import has_tiered_topic, tier_partitions
from ...remote.tiering import TierResult
from .arguments import add_clock, add_json
from .command import Command
from .output import emit, exit_status, pass_over_unreadable


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="this tiered topic's partitions only (default: every tiered topic's)")
    add_clock(parser, "the clock local retention judges the local copies by (default: wall clock)")
    add_json(parser)


def check_tier(args: argparse.Namespace, manager: LogManager) -> None:
    """What ``tier`` is refused for before it changes anything (its precheck): an unknown or
    untiered topic named, and a remote storage that is not set or does not answer."""
    if args.topic is not None:
        manager.partitions(args.topic)  # an unknown topic is an error, as for verify
        if not manager.topic_config(args.topic).remote_storage_enable:
            raise LogError(f"topic {args.topic} is not tiered: it has remote.storage.enable=false")
    if has_tiered_topic(manager, args.topic):
        open_store()


def summary(r: TierResult) -> str:
    """One partition's line of ``logctl tier``."""
    if r.status == FAILED or r.version is None:
        return f"{r.topic}-{r.partition}: {r.status}: {r.reason or 'nothing to tier yet'}"
    released = r.local_release.deleted_segments if r.local_release else []
    requests = ", ".join(f"{k}={v}" for k, v in r.requests.items()) or "none"
    text = (f"{r.topic}-{r.partition}: {r.status}: version {r.version}, remote "
            f"[{r.remote_log_start_offset}, {r.remote_end_offset}); uploaded {len(r.uploaded_segments)} segment(s), "
            f"{r.uploaded_bytes} bytes; released {len(released)} local copie(s); requests: {requests}")
    return text + (f"; {r.reason}" if r.reason else "")


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    check_tier(args, manager)
    now = args.now_ms if args.now_ms is not None else now_ms()
    pass_over_unreadable(args, manager, args.topic)
    results = tier_partitions(manager, args.topic, now_ms=now)
    emit(args, {"now_ms": now, "partitions": [r.to_dict() for r in results]},
         "\n".join(summary(r) for r in results) or "no tiered partitions")
    return exit_status(args, ((f"{r.topic}-{r.partition}", r.reason or r.status) for r in results
                              if r.status == FAILED))


COMMAND = Command(
    name="tier",
    help="copy rolled segments of tiered topics to the remote tier, release local copies",
    arguments=_arguments,
    run=_run,
    precheck=check_tier,
)
