"""The object store under one location's prefix: the few calls the remote tier makes, each
counted by request type (PUT, GET, LIST, DELETE, HEAD) and bytes, as a bill would count them.

It wraps ``obstore`` (the Python binding of the Rust ``object_store`` crate; why it was chosen
is in ``docs/object-storage.md``): ``put_new`` is the conditional create (S3 ``If-None-Match:
*``) that commits a version. Keys are relative to the location's prefix; the store never builds
a key outside it. Every failure becomes a one-line :class:`RemoteStorageError`.
"""

from __future__ import annotations

import mmap
import os
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .errors import RemoteStorageError

#: the reason in the debug text of an ``object_store`` error, as ``Os { ..., message: "Connection refused" }``
_OS_REASON = re.compile(r'message: "([^"\n]{1,200})"')


class ObjectExistsError(RemoteStorageError):
    """A conditional create found the name taken."""


class ObjectMissingError(RemoteStorageError):
    """An object that should exist does not."""


@dataclass(frozen=True)
class ObjectInfo:
    name: str  # relative to the location's prefix
    size: int
    last_modified_ms: int


def _one_line(exc: BaseException) -> str:
    """The first line of a client error, with the operating system's reason when its debug text
    (the lines after the first) holds one: "error sending request" alone does not say that the
    connection was refused or the name did not resolve."""
    full = str(exc)
    text = full.split("\n", 1)[0].strip()[:300] or type(exc).__name__
    if (cause := _OS_REASON.search(full)) is not None and cause.group(1) not in text:
        text += f" ({cause.group(1)})"
    return text


class ObjectStore:
    """A location's objects (see the module docstring). ``requests`` and ``bytes_in`` /
    ``bytes_out`` count what this instance did, for reports and the benchmark."""

    def __init__(self, raw, url: str) -> None:
        self.raw = raw
        self.url = url
        self._prefix = url.split("://", 1)[1].partition("/")[2] if url.startswith("s3://") else ""
        self.requests: Counter[str] = Counter()
        self.bytes_in = 0  # downloaded
        self.bytes_out = 0  # uploaded
        self._lock = threading.Lock()

    def key(self, name: str) -> str:
        if not name or name.startswith("/") or ".." in name.split("/"):
            raise RemoteStorageError(f"refused object name {name!r}")
        return f"{self._prefix}/{name}" if self._prefix else name

    def _count(self, kind: str, down: int = 0, up: int = 0) -> None:
        with self._lock:
            self.requests[kind] += 1
            self.bytes_in += down
            self.bytes_out += up

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        import obstore.exceptions as ox

        try:
            yield
        except ox.AlreadyExistsError as exc:
            raise ObjectExistsError(f"{what}: already exists") from exc
        except (FileNotFoundError, ox.NotFoundError) as exc:
            raise ObjectMissingError(f"{what}: no such object in {self.url}") from exc
        except ox.PreconditionError as exc:
            raise ObjectExistsError(f"{what}: precondition failed") from exc
        except (ox.BaseError, OSError) as exc:
            raise RemoteStorageError(f"{what} in {self.url}: {_one_line(exc)}") from exc
        except BaseException as exc:  # a Rust panic in the client (pyo3's PanicException is no Exception)
            if type(exc).__name__ != "PanicException":
                raise
            raise RemoteStorageError(f"{what} in {self.url}: the S3 client failed: {_one_line(exc)}") from None

    def check_reachable(self) -> None:
        """One LIST of the prefix: proves the endpoint, bucket and credentials before any write."""
        with self._errors("remote storage is not reachable"):
            self.raw.list_with_delimiter(self._prefix + "/" if self._prefix else None)
        self._count("LIST")

    def put_new(self, name: str, data: bytes) -> None:
        """Create ``name`` only if absent (the commit primitive); :class:`ObjectExistsError` when
        it is there already, and nothing changed."""
        import obstore

        try:
            with self._errors(f"create {name}"):
                obstore.put(self.raw, self.key(name), data, mode="create")
        finally:  # a refused create is a request all the same
            self._count("PUT", up=len(data))

    def put_fd(self, name: str, fd: int) -> int:
        """Upload the whole file open at ``fd`` as the new object ``name`` (created only if
        absent: names are unique, so this never replaces anything). Returns its size. The file
        is mapped, not read into memory: a 1 GiB segment costs page cache, not heap."""
        size = os.fstat(fd).st_size
        if size == 0:
            self.put_new(name, b"")
            return 0
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mapped:
            view = memoryview(mapped)
            try:
                self.put_new(name, view)  # type: ignore[arg-type]
            finally:
                view.release()
        return size

    def get(self, name: str) -> bytes:
        import obstore

        with self._errors(f"read {name}"):
            data = bytes(obstore.get(self.raw, self.key(name)).bytes())
        self._count("GET", down=len(data))
        return data

    def get_range(self, name: str, start: int, end: int) -> bytes:
        import obstore

        with self._errors(f"read {name} bytes {start}-{end}"):
            data = bytes(obstore.get_range(self.raw, self.key(name), start=start, end=end))
        self._count("GET", down=len(data))
        return data

    def head(self, name: str) -> ObjectInfo:
        import obstore

        with self._errors(f"stat {name}"):
            meta = obstore.head(self.raw, self.key(name))
        self._count("HEAD")
        return self._info(meta)

    def list(self, folder: str, *, after: str | None = None) -> list[ObjectInfo]:
        """Every object under ``folder`` (relative, ending in ``/``), sorted by name; ``after``:
        only names sorting after it (S3's start-after, so a reader that knows version N lists
        only what came since). One LIST request per page."""
        import obstore

        out: list[ObjectInfo] = []
        pages = 0
        with self._errors(f"list {folder}"):
            for page in obstore.list(self.raw, prefix=self.key(folder), offset=self.key(after) if after else None):
                pages += 1
                out.extend(self._info(m) for m in page)
        for _ in range(max(pages, 1)):
            self._count("LIST")
        return sorted(out, key=lambda o: o.name)

    def delete(self, name: str) -> None:
        import obstore

        with self._errors(f"delete {name}"):
            obstore.delete(self.raw, self.key(name))
        self._count("DELETE")

    def _info(self, meta) -> ObjectInfo:
        path = str(meta["path"])
        name = path[len(self._prefix) + 1:] if self._prefix else path
        return ObjectInfo(name, int(meta["size"]), int(meta["last_modified"].timestamp() * 1000))

    def counters(self) -> dict[str, int]:
        """Requests by type and bytes each way, for a report's metadata."""
        with self._lock:
            return {**{f"requests_{k.lower()}": v for k, v in sorted(self.requests.items())},
                    "bytes_downloaded": self.bytes_in, "bytes_uploaded": self.bytes_out}

    def counters_since(self, before: dict[str, int]) -> dict[str, int]:
        """What this instance did since :meth:`counters` returned ``before``: one partition's
        share of a run over many that share the store."""
        return {k: v - before.get(k, 0) for k, v in self.counters().items() if v - before.get(k, 0)}
