"""The remote tier's errors: each a ``LogError``, so ``logctl``, the Spark jobs and the platform
print one line and change nothing."""

from __future__ import annotations

from ..errors import LogChangedError, LogError


class RemoteStorageError(LogError):
    """The remote storage is misconfigured, unreachable, or answered with an error."""


class RemoteMetadataError(RemoteStorageError):
    """A version object is not what this platform writes: unparseable, a field missing or of the
    wrong type, or an object name outside its partition's prefix. Nothing is built from it."""


class VersionConflictError(RemoteStorageError, LogChangedError):
    """Another writer committed the version this one meant to write (the conditional write
    lost): the loser's change is not visible to any reader, and its uploads are swept later.
    A ``LogChangedError`` too, so a run reports the partition ``changed``, as for a local swap
    that found its input changed."""
