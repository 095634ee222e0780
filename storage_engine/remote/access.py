"""How engine code reaches a topic's remote tier: the location from the environment, opened
once per process, and the refusal of a tiered topic when no location is configured."""

from __future__ import annotations

import threading
from pathlib import Path

from ..config.topic import LogConfig
from .errors import RemoteStorageError
from .local_state import check_location
from .location import ENV_REMOTE_STORAGE, RemoteLocation, location_from_env
from .partition import RemotePartition
from .store import ObjectStore

_stores: dict[RemoteLocation, ObjectStore] = {}
_lock = threading.Lock()


def configured_location() -> RemoteLocation:
    """The location ``LOGPLAT_REMOTE_STORAGE`` names; refused in one line when it is unset."""
    location = location_from_env()
    if location is None:
        raise RemoteStorageError(f"{ENV_REMOTE_STORAGE} is not set: the remote tier needs a location "
                                 "(s3://bucket/prefix, with AWS_ENDPOINT_URL and the AWS credentials)")
    return location


def open_store(location: RemoteLocation | None = None) -> ObjectStore:
    """The store at ``location`` (default: :func:`configured_location`), opened (and proved
    reachable) once per process and location."""
    location = location or configured_location()
    with _lock:
        store = _stores.get(location)
        if store is None:
            store = _stores[location] = location.open()
        return store


def remote_partition(topic: str, partition: int, config: LogConfig, store: ObjectStore | None = None, *,
                     directory: Path | None = None) -> RemotePartition:
    """``topic``-``partition``'s remote tier; refused unless the topic has
    ``remote.storage.enable=true``, and, given the partition's local ``directory``, unless its
    tier is remembered at this location (``local_state.check_location``)."""
    if not config.remote_storage_enable:
        raise RemoteStorageError(f"topic {topic} has remote.storage.enable=false: it has no remote tier")
    rp = RemotePartition(store or open_store(), topic, partition)
    if directory is not None:
        check_location(directory, rp.store.url)
    return rp
