"""Which Python client the remote tier uses: obstore against boto3 and pyarrow's S3FileSystem on
the same loopback SeaweedFS, in the same run.

Measures what the remote tier does: conditional creates of small version objects (and whether
the client can make one at all), 64 MiB segment uploads and downloads, and 4 KiB range reads.
boto3 is not a dependency of the platform: run this with an environment that has it
(``pip install boto3``); without it, its rows say so.

    .venv/bin/python bench/bench_object_store_clients.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from platform_assets.tools.object_store_server import ACCESS_KEY, SECRET_KEY, seaweedfs  # noqa: E402

SMALL = 200
BIG = 64 << 20
RANGES = 500


def _rate(n: int, t: float) -> str:
    return f"{n / t:8.0f}/s"


def bench_obstore(endpoint: str, bucket: str) -> dict[str, str]:
    import obstore
    from obstore.exceptions import AlreadyExistsError
    from obstore.store import S3Store

    s = S3Store(bucket, endpoint=endpoint, access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY,
                region="us-east-1", client_options={"allow_http": True})
    t = time.perf_counter()
    for i in range(SMALL):
        obstore.put(s, f"o/v{i}", b"{}" * 200, mode="create")
    create = time.perf_counter() - t
    try:
        obstore.put(s, "o/v0", b"x", mode="create")
        conditional = "NOT refused"
    except AlreadyExistsError:
        conditional = "refused (412)"
    big = b"z" * BIG
    t = time.perf_counter()
    obstore.put(s, "o/big", big, mode="create")
    up = time.perf_counter() - t
    t = time.perf_counter()
    obstore.get(s, "o/big").bytes()
    down = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(RANGES):
        obstore.get_range(s, "o/big", start=i * 4096, end=i * 4096 + 4096)
    rng = time.perf_counter() - t
    return {"conditional create": conditional, "small creates": _rate(SMALL, create),
            "64 MiB upload": f"{BIG / up / 2**20:6.0f} MiB/s", "64 MiB download": f"{BIG / down / 2**20:6.0f} MiB/s",
            "4 KiB range reads": _rate(RANGES, rng)}


def bench_boto3(endpoint: str, bucket: str) -> dict[str, str]:
    try:
        import boto3
    except ImportError:
        return {"conditional create": "boto3 not installed"}
    c = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                     region_name="us-east-1")
    t = time.perf_counter()
    for i in range(SMALL):
        c.put_object(Bucket=bucket, Key=f"b/v{i}", Body=b"{}" * 200, IfNoneMatch="*")
    create = time.perf_counter() - t
    try:
        c.put_object(Bucket=bucket, Key="b/v0", Body=b"x", IfNoneMatch="*")
        conditional = "NOT refused"
    except c.exceptions.ClientError as exc:
        conditional = f"refused ({exc.response['Error']['Code']})"
    big = b"z" * BIG
    t = time.perf_counter()
    c.put_object(Bucket=bucket, Key="b/big", Body=big, IfNoneMatch="*")
    up = time.perf_counter() - t
    t = time.perf_counter()
    c.get_object(Bucket=bucket, Key="b/big")["Body"].read()
    down = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(RANGES):
        c.get_object(Bucket=bucket, Key="b/big", Range=f"bytes={i * 4096}-{i * 4096 + 4095}")["Body"].read()
    rng = time.perf_counter() - t
    return {"conditional create": conditional, "small creates": _rate(SMALL, create),
            "64 MiB upload": f"{BIG / up / 2**20:6.0f} MiB/s", "64 MiB download": f"{BIG / down / 2**20:6.0f} MiB/s",
            "4 KiB range reads": _rate(RANGES, rng)}


def bench_pyarrow(endpoint: str, bucket: str) -> dict[str, str]:
    from pyarrow import fs

    s3 = fs.S3FileSystem(endpoint_override=endpoint.removeprefix("http://"), scheme="http", access_key=ACCESS_KEY,
                         secret_key=SECRET_KEY, region="us-east-1")
    t = time.perf_counter()
    for i in range(SMALL):
        with s3.open_output_stream(f"{bucket}/a/v{i}") as f:
            f.write(b"{}" * 200)
    create = time.perf_counter() - t
    big = b"z" * BIG
    t = time.perf_counter()
    with s3.open_output_stream(f"{bucket}/a/big") as f:
        f.write(big)
    up = time.perf_counter() - t
    t = time.perf_counter()
    with s3.open_input_file(f"{bucket}/a/big") as f:
        f.read()
    down = time.perf_counter() - t
    t = time.perf_counter()
    with s3.open_input_file(f"{bucket}/a/big") as f:
        for i in range(RANGES):
            f.read_at(4096, i * 4096)
    rng = time.perf_counter() - t
    return {"conditional create": "no API for it", "small creates (plain PUT)": _rate(SMALL, create),
            "64 MiB upload": f"{BIG / up / 2**20:6.0f} MiB/s", "64 MiB download": f"{BIG / down / 2**20:6.0f} MiB/s",
            "4 KiB range reads": _rate(RANGES, rng)}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, seaweedfs(Path(tmp)) as server:
        for name, fn in (("obstore 0.12.1", bench_obstore), ("boto3", bench_boto3), ("pyarrow S3FileSystem", bench_pyarrow)):
            rows = fn(server.endpoint, server.bucket)
            print(f"{name:22s} " + "; ".join(f"{k}: {v.strip()}" for k, v in rows.items()))


if __name__ == "__main__":
    main()
