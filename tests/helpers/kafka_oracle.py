"""kafka-python as the independent oracle of the codec tests.

Its snappy support needs the ``python-snappy`` module, which this project does not depend on;
when it is missing, ``kafka.codec`` gets a two-function stand-in (raw snappy blocks from
cramjam). Everything else (xerial framing, chunking, the batch container, the CRC) stays
kafka-python's own code.
"""

from __future__ import annotations

import cramjam
import kafka.codec
import pytest


class CramjamSnappy:
    """The two calls kafka.codec makes on the ``snappy`` module, backed by cramjam."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(bytes(data)))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(bytes(data)))


@pytest.fixture(autouse=True)
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    if not kafka.codec.has_snappy():
        monkeypatch.setattr(kafka.codec, "snappy", CramjamSnappy)
