"""The real S3 server of the tests (SeaweedFS, started once per session) and stores on it.

Every test gets its own prefix in the one bucket (:func:`remote_env`), so tests never see each
other's objects; the commit, race and kill tests run here, never on the local-file store.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from platform_assets.tools.object_store_server import SeaweedFS, seaweedfs


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[SeaweedFS]:
    with seaweedfs(Path(tmp_path_factory.mktemp("seaweedfs"))) as server:
        yield server


@pytest.fixture
def remote_env(s3_server: SeaweedFS, monkeypatch) -> dict[str, str]:
    """A fresh prefix on the session's server, set in this test's environment."""
    env = s3_server.env(f"t-{uuid.uuid4().hex[:12]}")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env
