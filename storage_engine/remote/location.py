"""Where the remote tier lives: ``LOGPLAT_REMOTE_STORAGE`` and the usual AWS variables.

``s3://bucket/prefix`` is an S3 (or S3-compatible) bucket: the endpoint and credentials come
from ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and ``AWS_REGION``
(default ``us-east-1``); plain ``http`` is allowed only for a loopback endpoint.
``file:///path`` is a local directory holding the same objects (fast tests, one machine).
Everything is checked before anything is written (:func:`parse_location`), and
:meth:`RemoteLocation.open` proves the store answers before a command goes on.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlsplit

from .errors import RemoteStorageError

ENV_REMOTE_STORAGE = "LOGPLAT_REMOTE_STORAGE"
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_PREFIX_PART = re.compile(r"[A-Za-z0-9._=-]+")
#: what a request header (the signature's credential, the Host) can carry: printable ASCII, no space
_HEADER_TEXT = re.compile(r"[!-~]+")
#: how long one request may take before it counts as unreachable (the default retries for minutes)
REQUEST_TIMEOUT_S = 30
CONNECT_TIMEOUT_S = 5


@dataclass(frozen=True)
class RemoteLocation:
    """A parsed remote storage location: ``scheme`` ``s3`` or ``file``, the bucket (or the local
    root), the key prefix (no leading or trailing ``/``; may be empty), and the S3 settings."""

    scheme: str
    bucket: str
    prefix: str
    endpoint: str | None = None
    region: str = "us-east-1"
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)  # never printed in an error or a log

    @property
    def url(self) -> str:
        root = f"s3://{self.bucket}" if self.scheme == "s3" else f"file://{self.bucket}"
        return f"{root}/{self.prefix}" if self.prefix else root

    def open(self):
        """An :class:`~.store.ObjectStore` on this location, after one request proved it answers
        (a listing of the prefix): a wrong endpoint, bucket or key fails here, before any write."""
        from .store import ObjectStore

        store = ObjectStore(self._raw_store(), self.url)
        store.check_reachable()
        return store

    def _raw_store(self):
        import obstore.store as stores

        if self.scheme == "file":
            os.makedirs(self.bucket, exist_ok=True)
            return stores.LocalStore(self.bucket, automatic_cleanup=False)
        client = {"timeout": timedelta(seconds=REQUEST_TIMEOUT_S),
                  "connect_timeout": timedelta(seconds=CONNECT_TIMEOUT_S),
                  "allow_http": bool(self.endpoint and self.endpoint.startswith("http://"))}
        retry = {"max_retries": 2, "retry_timeout": timedelta(seconds=REQUEST_TIMEOUT_S),
                 "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2),
                             "base": 2}}
        kwargs = {"region": self.region, "client_options": client, "retry_config": retry,
                  "access_key_id": self.access_key_id, "secret_access_key": self.secret_access_key,
                  "virtual_hosted_style_request": False}
        if self.endpoint:
            kwargs["endpoint"] = self.endpoint
        return stores.S3Store(self.bucket, **kwargs)


def parse_location(url: str, env: Mapping[str, str] | None = None) -> RemoteLocation:
    """``url`` as a :class:`RemoteLocation`, with the S3 settings from ``env`` (default: the
    process environment); a one-line :class:`RemoteStorageError` naming what is wrong."""
    env = os.environ if env is None else env
    parts = urlsplit(url)
    where = f"{ENV_REMOTE_STORAGE}={url!r}"
    if parts.scheme == "file":
        if parts.netloc or not parts.path.startswith("/") or parts.query or parts.fragment:
            raise RemoteStorageError(f"{where}: a file location is file:///absolute/path")
        return RemoteLocation("file", os.path.normpath(parts.path), "")
    if parts.scheme != "s3":
        raise RemoteStorageError(f"{where}: the remote storage is s3://bucket/prefix (or file:///path)")
    if not _BUCKET.fullmatch(parts.netloc or ""):
        raise RemoteStorageError(f"{where}: {parts.netloc!r} is not an S3 bucket name (3-63 characters: "
                                 "lowercase letters, digits, '.', '-')")
    if parts.query or parts.fragment:
        raise RemoteStorageError(f"{where}: a location has no query or fragment")
    prefix = parts.path.strip("/")
    if prefix and not all(p for p in prefix.split("/")) or parts.path.startswith("//"):
        raise RemoteStorageError(f"{where}: the prefix {parts.path!r} has an empty part ('//')")
    if prefix and not all(_PREFIX_PART.fullmatch(p) and p not in (".", "..") for p in prefix.split("/")):
        raise RemoteStorageError(f"{where}: the prefix {prefix!r} may hold only letters, digits and . _ = - "
                                 "between single slashes")
    endpoint = env.get("AWS_ENDPOINT_URL") or None
    if endpoint is not None:
        _check_endpoint(endpoint)
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        raise RemoteStorageError(f"{where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for the bucket")
    region = env.get("AWS_REGION") or "us-east-1"
    for name, value in (("AWS_ACCESS_KEY_ID", key), ("AWS_SECRET_ACCESS_KEY", secret), ("AWS_REGION", region)):
        if not _HEADER_TEXT.fullmatch(value):  # never echoed: it may be a secret
            raise RemoteStorageError(f"{name} holds a character other than printable ASCII (a space, a newline, "
                                     "a control character): it cannot be sent in a request signature")
    return RemoteLocation("s3", parts.netloc, prefix, endpoint, region, key, secret)


def _check_endpoint(endpoint: str) -> None:
    parts = urlsplit(endpoint)
    try:
        port = parts.port  # out of 0..65535: ValueError
    except ValueError:
        port = 0
    if (parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query
            or parts.fragment or parts.username is not None or port == 0 or not _HEADER_TEXT.fullmatch(endpoint)):
        raise RemoteStorageError(f"AWS_ENDPOINT_URL={endpoint!r}: an endpoint is http(s)://host[:port], "
                                 "the port 1-65535, with no credentials, path or query")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise RemoteStorageError(f"AWS_ENDPOINT_URL={endpoint!r}: plain http is allowed only for a loopback "
                                 "endpoint (127.0.0.1, ::1, localhost); use https")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def location_from_env(env: Mapping[str, str] | None = None) -> RemoteLocation | None:
    """The location ``LOGPLAT_REMOTE_STORAGE`` names, or None when it is unset."""
    env = os.environ if env is None else env
    url = env.get(ENV_REMOTE_STORAGE, "").strip()
    return parse_location(url, env) if url else None
