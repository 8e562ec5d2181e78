"""The hostile-store cases that apply to an evidence store in a bucket (moto on
127.0.0.1): keys with ``../`` are never copied to a path (whatever folder they claim),
a gzip bomb stops at its recorded size, and ``HEAD`` is a cache the chain is checked
against, as for a folder. Each case: its named line, exit 1, nothing written outside
this machine's copy, a bounded peak RSS and no hang."""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from sandbox.server import SandboxServer
from tests.cli.helpers import CREDENTIALS, SECRET
from tests.evidence.hostile import gzip_bomb, run_bounded, snapshot
from tests.lake.objectstore import ObjectStore, object_store

pytestmark = pytest.mark.timeout(180)

PREFIX = "ev"


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    """The small sandbox listing 12 connections: every kind of answer, a fifth of the
    responses, since each case copies the store within the bucket and verifies it from
    an empty cache (every object fetched again)."""
    with SandboxServer(scale="small", password=SECRET, connections=12) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def bucket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    with object_store(tmp_path_factory.mktemp("moto") / "moto.log") as store:
        yield store


@pytest.fixture(scope="module")
def synced(bucket: ObjectStore, server: SandboxServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse whose evidence of two syncs is in the bucket under `ev/`."""
    folder = tmp_path_factory.mktemp("bucket-warehouse")
    env = {**CREDENTIALS, **bucket.env(), "XDG_CACHE_HOME": str(folder / "cache")}
    for _ in range(2):
        ran = run_bounded(["sync", "--base-url", server.base_url, "-w", str(folder / "w.duckdb"), "--no-models",
                           "--evidence", bucket.url(PREFIX)], folder, env, timeout=120)
        assert ran.code == 0, ran.err
    return folder / "w.duckdb"


@pytest.fixture
def prefix(bucket: ObjectStore, synced: Path, request: pytest.FixtureRequest) -> str:
    """A copy of the store under a prefix of the test's own."""
    own = f"case-{hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]}"
    client = bucket.client()
    for key in bucket.keys(f"{PREFIX}/"):
        client.copy_object(Bucket=bucket.bucket, Key=f"{own}/{key[len(PREFIX) + 1:]}",
                           CopySource={"Bucket": bucket.bucket, "Key": key})
    return own


def _verify(bucket: ObjectStore, synced: Path, prefix: str, tmp_path: Path) -> list[str]:
    """The problems `diligence verify` names for the store under `prefix`, verified from
    an empty cache (an auditor's machine) in `tmp_path/auditor`."""
    auditor = tmp_path / "auditor"
    auditor.mkdir()
    (tmp_path / "outside").mkdir(exist_ok=True)
    before = snapshot(tmp_path, besides=(auditor,))
    ran = run_bounded(["verify", "-w", str(synced), "--evidence", bucket.url(prefix)], auditor,
                      {**bucket.env(), "XDG_CACHE_HOME": str(auditor / "cache")}).bounded()
    assert ran.code == 1, (ran.out, ran.err)
    assert snapshot(tmp_path, besides=(auditor,)) == before
    return ran.lines


@pytest.mark.parametrize("relative", [
    "responses/ab/../../../../../../outside/x.gz",
    "entries/../../../../../../outside/y.gz",
    "syncs/../../../../../../outside/PWNED.manifest.gz",
    "syncs/../../../../../../outside/PWNED.manifest.parts/0000000000000000",
])
def test_a_key_with_dotdot_is_named_and_never_copied(bucket: ObjectStore, synced: Path, prefix: str,
                                                     tmp_path: Path, relative: str) -> None:
    key = f"{prefix}/{relative}"
    bucket.client().put_object(Bucket=bucket.bucket, Key=key, Body=gzip.compress(b'{"forged": true}'))
    assert key in bucket.keys(f"{prefix}/")  # the bucket keeps the key as it was written
    problems = _verify(bucket, synced, prefix, tmp_path)
    shown = f"{bucket.bucket}/{key}"
    assert any(line.startswith(shown) and ("the evidence store's layout does not allow" in line)
               for line in problems), problems
    assert not list(tmp_path.rglob("x.gz")) and not list(tmp_path.rglob("PWNED*")) and not list(tmp_path.rglob("y.gz"))


def test_a_gzip_bomb_in_the_bucket_stops_at_its_recorded_size(bucket: ObjectStore, synced: Path, prefix: str,
                                                              tmp_path: Path) -> None:
    key = sorted(k for k in bucket.keys(f"{prefix}/responses/"))[0]
    bomb = tmp_path / "bomb.gz"
    gzip_bomb(bomb)
    bucket.client().upload_file(str(bomb), bucket.bucket, key)
    bomb.unlink()
    sha = key.rsplit("/", 1)[-1].removesuffix(".gz")
    problems = _verify(bucket, synced, prefix, tmp_path)
    assert any(p.startswith(f"response {sha} is damaged: ") and " decompresses to more than " in p
               for p in problems), problems


def test_head_garbage_in_the_bucket_is_named(bucket: ObjectStore, synced: Path, prefix: str,
                                            tmp_path: Path) -> None:
    client = bucket.client()
    client.put_object(Bucket=bucket.bucket, Key=f"{prefix}/syncs/HEAD", Body=b"garbage\n")
    problems = _verify(bucket, synced, prefix, tmp_path)
    assert len(problems) == 1 and problems[0].endswith("syncs/HEAD is not a head (it holds 'garbage')"), problems


def test_head_behind_in_the_bucket_is_named(bucket: ObjectStore, synced: Path, prefix: str, tmp_path: Path) -> None:
    client = bucket.client()
    first, last = sorted(k for k in bucket.keys(f"{prefix}/syncs/") if k.endswith(".manifest.gz"))
    seals = [orjson.loads(gzip.decompress(client.get_object(Bucket=bucket.bucket, Key=key)["Body"].read()))["seal"]
             for key in (first, last)]
    first_id, last_id = (key.rsplit("/", 1)[1].removesuffix(".manifest.gz") for key in (first, last))
    client.put_object(Bucket=bucket.bucket, Key=f"{prefix}/syncs/HEAD", Body=f"{seals[0]['hash']} {first_id}\n".encode())
    problems = _verify(bucket, synced, prefix, tmp_path)
    assert problems == [f"HEAD names sync {first_id} ({seals[0]['hash'][:12]}), which is not the last seal: "
                        f"sync {last_id} ({seals[1]['hash'][:12]}) is sealed after it"]
