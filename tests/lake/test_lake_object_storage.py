"""Past one machine: the lake's Parquet files and the evidence store in a bucket (moto in
server mode on 127.0.0.1), one PostgreSQL catalog, and "machines" that share nothing else:
each worker process has its own working folder and HOME.

- two machines sync one namespace each at the same time, one builds the models: the
  analytics equal a file warehouse's, the Parquet files are in the bucket and on no disk,
  the evidence chain (in the bucket) verifies from the other machine;
- analysts attach the lake read-only with the lines `diligence models` prints and their
  own S3 credentials; an auditor replays the bucket's evidence into a file of its own;
- a sync killed on one machine, once it has sent some of its manifest, resumes on the
  other;
- the bucket goes away mid-load: the namespace fails in one line, nothing of it is in
  the catalog, and the rerun is exact;
- the secret key is in no file and no output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import duckdb
import httpx
import pytest

from diligence.analytics import rebuild_analytics
from diligence.evidence.bucket import PARTS
from diligence.warehouse import lake
from diligence.warehouse.location import WarehouseLocation, parse_location
from pipelines.evidence.manifest import SUFFIX, read_manifest
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.helpers import requests_answered, sync
from tests.processes import kill_when

from .objectstore import ObjectStore
from .postgres import PostgresCluster
from .test_lake_cli import AS_OF, analytics_rows
from .test_lake_resume import CURRENT

pytestmark = pytest.mark.slow

DILIGENCE = [sys.executable, "-m", "diligence"]
TIMEOUT = 400
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(scale="small") as sandbox:
        yield sandbox


@pytest.fixture
def lake_in_bucket(postgres: PostgresCluster, bucket: ObjectStore, request: pytest.FixtureRequest,
                   monkeypatch: pytest.MonkeyPatch) -> tuple[WarehouseLocation, str]:
    """A new lake whose data path is in the bucket, and the evidence store's URL beside it
    (a prefix of its own); this process reads it with the bucket's standard variables."""
    for name, value in bucket.env().items():
        monkeypatch.setenv(name, value)
    name = request.node.name.removeprefix("test_")[:40].rstrip("_")
    conninfo = postgres.create_database(f"s3_{name}")
    return (parse_location("ducklake:postgres:" + conninfo, bucket.url(f"{name}/lake")),
            bucket.url(f"{name}/evidence"))


def _machine(root: Path, store: ObjectStore, location: WarehouseLocation, evidence: str,
             **extra: str) -> tuple[Path, dict[str, str]]:
    """A worker's own working folder and environment: its HOME, the bucket's standard
    variables, the warehouse, the service's credentials."""
    work, home = root / "work", root / "home"
    work.mkdir(parents=True)
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SOURCES__", "DILIGENCE_", "AWS_", "XDG_", "EVIDENCE__"))}
    env.update(store.env(), HOME=str(home), PYTHONPATH=str(REPO),
               DILIGENCE_WAREHOUSE=location.uri, DILIGENCE_DATA_PATH=str(location.data_path),
               DILIGENCE_EVIDENCE=evidence,
               SOURCES__COMPANY_CONNECTIONS__EMAIL=DEFAULT_EMAIL,
               SOURCES__COMPANY_CONNECTIONS__PASSWORD=DEFAULT_PASSWORD, **extra)
    return work, env


def _run(args: list[str], machine: tuple[Path, dict[str, str]]) -> subprocess.CompletedProcess[str]:
    work, env = machine
    return subprocess.run(DILIGENCE + args, cwd=work, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)


def _start(args: list[str], machine: tuple[Path, dict[str, str]], **kwargs: object
           ) -> subprocess.Popen[str]:
    work, env = machine
    return subprocess.Popen(DILIGENCE + args, cwd=work, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)  # type: ignore[call-overload]


def _current(location: WarehouseLocation) -> list[tuple]:
    con = lake.connect(location, read_only=True)
    try:
        return sorted(con.execute(CURRENT).fetchall())
    finally:
        con.close()


def _reference_current(server: SandboxServer, path: Path) -> list[tuple]:
    sync(server, path)
    with duckdb.connect(str(path), read_only=True) as con:
        return sorted(con.execute(CURRENT).fetchall())


def _no_secret_anywhere(store: ObjectStore, folders: list[Path], outputs: list[str]) -> None:
    for text in outputs:
        assert store.secret not in text
    for folder in folders:
        found = subprocess.run(["grep", "-rl", "--binary-files=text", store.secret, str(folder)],
                               capture_output=True, text=True)
        assert found.stdout == "", f"the secret key is in {found.stdout}"


@pytest.mark.timeout(900)
def test_two_machines_share_the_lake_and_its_evidence_through_the_bucket(
        server: SandboxServer, bucket: ObjectStore, lake_in_bucket: tuple[WarehouseLocation, str],
        postgres: PostgresCluster, tmp_path: Path) -> None:
    location, evidence = lake_in_bucket
    namespaces = server.truth()["namespaces"]
    one = _machine(tmp_path / "machine-1", bucket, location, evidence)
    two = _machine(tmp_path / "machine-2", bucket, location, evidence)
    outputs: list[str] = []

    processes = [_start(["sync", "--no-models", "--base-url", server.base_url, "--namespace", ns], m)
                 for ns, m in zip(namespaces, (one, two), strict=True)]
    for process in processes:
        out, err = process.communicate(timeout=TIMEOUT)
        outputs += [out, err]
        assert process.returncode == 0, err
        assert "synced 1/1 namespaces" in out
    built = _run(["models", "--as-of", AS_OF], one)
    outputs += [built.stdout, built.stderr]
    assert built.returncode == 0, built.stderr

    # exact: the analytics equal a file warehouse's synced from the same sandbox
    reference = tmp_path / "reference.duckdb"
    sync(server, reference)
    rebuild_analytics(reference, as_of=datetime.fromisoformat(AS_OF))
    with duckdb.connect(str(reference), read_only=True) as con:
        expected = analytics_rows(con)
        connections = con.execute("select count(*) from analytics.connections").fetchone()[0]
    con = lake.connect(location, read_only=True)  # this process: the same standard variables
    try:
        actual = analytics_rows(con)
    finally:
        con.close()
    assert set(actual) == set(expected) and len(expected) >= 5
    for table in expected:
        assert actual[table] == expected[table], table

    # the rows are Parquet files in the bucket, on neither machine's disk
    prefix = str(location.data_path).split("/", 3)[3]
    parquet = [key for key in bucket.keys(prefix) if key.endswith(".parquet")]
    assert len(parquet) >= 10
    assert not list(tmp_path.rglob("ducklake-*.parquet"))

    # one evidence chain in the bucket, two syncs sealed from two machines; the other verifies it
    syncs_prefix = evidence.split("/", 3)[3] + "syncs/"
    sealed = [k for k in bucket.keys(syncs_prefix) if k.endswith(".manifest.gz")]
    assert len(sealed) == 2 and bucket.keys(syncs_prefix + "HEAD")
    assert not [k for k in bucket.keys(syncs_prefix) if ".parts/" in k or k.endswith(".chain-lock")]
    # `status` on either machine shows the bucket's chain, not only its own sync
    head = bucket.client().get_object(Bucket=bucket.bucket, Key=syncs_prefix + "HEAD")["Body"].read()
    for machine in (one, two):
        shown = _run(["status", "--json"], machine)
        outputs += [shown.stdout, shown.stderr]
        assert shown.returncode == 0, shown.stderr
        kept = json.loads(shown.stdout)["evidence"]
        assert (kept["syncs"], kept["head"]) == (2, head.decode().split()[0]), kept
    verified = _run(["verify"], two)
    outputs += [verified.stdout, verified.stderr]
    assert verified.returncode == 0, verified.stderr + verified.stdout
    assert "verified 2 syncs" in verified.stdout
    # an auditor with only the bucket's URL and keys replays both machines' syncs into a file
    auditor_env = {k: v for k, v in two[1].items() if not k.startswith("DILIGENCE_")}
    auditor = (tmp_path / "auditor", auditor_env | {"HOME": str(tmp_path / "auditor")})
    auditor[0].mkdir()
    replayed = _run(["replay", "--evidence", evidence, "--warehouse", "replayed.duckdb", "--no-models"], auditor)
    outputs += [replayed.stdout, replayed.stderr]
    assert replayed.returncode == 0, replayed.stderr + replayed.stdout
    assert "replayed 2 syncs" in replayed.stdout
    with duckdb.connect(str(auditor[0] / "replayed.duckdb"), read_only=True) as con:
        assert sorted(con.execute(CURRENT).fetchall()) == _current(location)
    # a response altered in the bucket is named, also by a machine that holds a copy of it
    import gzip

    key = next(k for k in bucket.keys(evidence.split("/", 3)[3] + "responses/"))
    bucket.client().put_object(Bucket=bucket.bucket, Key=key, Body=gzip.compress(b'{"altered": true}'))
    altered = _run(["verify"], two)
    outputs += [altered.stdout, altered.stderr]
    sha = key.rsplit("/", 1)[1].removesuffix(".gz")
    assert altered.returncode != 0 and f"response {sha} was altered" in altered.stdout + altered.stderr

    # analysts: the printed lines, their own keys, DuckDB's shell, read-only
    printed = built.stdout[built.stdout.index("INSTALL ducklake"):].strip()
    assert "CREATE SECRET" in printed and "URL_STYLE 'path'" in printed and "USE_SSL false" in printed
    analyst = tmp_path / "analyst"
    analyst.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DILIGENCE_"))}
    env.update(HOME=str(analyst), AWS_ACCESS_KEY_ID=bucket.key_id,
               AWS_SECRET_ACCESS_KEY=bucket.secret)
    subprocess.run([sys.executable, "-c", "import duckdb, duckdb_extensions as x\n"
                    "for n in ('ducklake', 'postgres', 'httpfs'): x.import_extension(n, con=duckdb.connect())"],
                   env=env, check=True, timeout=120)
    shell = Path(sys.executable).with_name("duckdb")
    read = subprocess.run([str(shell), "-csv", "-noheader", "-c",
                           printed + "\nSELECT count(*) FROM analytics.connections;"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr
    assert read.stdout.split()[-1] == str(connections)
    write = subprocess.run([str(shell), "-c", printed + "\nDELETE FROM analytics.connections;"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert write.returncode != 0 and "read-only" in (write.stderr + write.stdout).lower()

    _no_secret_anywhere(bucket, [tmp_path, postgres.root], outputs)


#: entries of its manifest a killed machine has sent to the bucket before it is killed
PUSHED = 40


def _pushed_entries(bucket: ObjectStore, prefix: str, parts: dict[str, bytes], folder: Path) -> int:
    """The entries of the one manifest being written under `prefix` that the bucket holds
    (its pieces, each written once, are fetched once into `parts`, and put together in
    `folder` under the manifest's name)."""
    for key in bucket.keys(prefix):
        if SUFFIX + PARTS in key and key.rsplit("/", 1)[1].isdigit() and key not in parts:
            parts[key] = bucket.client().get_object(Bucket=bucket.bucket, Key=key)["Body"].read()
    if not parts:
        return 0
    sync_id = next(iter(parts)).rsplit("/", 2)[1].removesuffix(SUFFIX + PARTS.rstrip("/"))
    folder.mkdir(exist_ok=True)
    copy = folder / f"{sync_id}{SUFFIX}"
    copy.write_bytes(b"".join(parts[key] for key in sorted(parts)))
    manifest = read_manifest(copy)
    return 0 if manifest is None else len(manifest.entries)


@pytest.mark.timeout(900)
def test_a_sync_killed_on_one_machine_resumes_on_another(
        server: SandboxServer, bucket: ObjectStore, lake_in_bucket: tuple[WarehouseLocation, str],
        tmp_path: Path) -> None:
    location, evidence = lake_in_bucket
    httpx.post(f"{server.base_url}/_sandbox/stats/reset")
    expected = _reference_current(server, tmp_path / "reference.duckdb")
    full = requests_answered(server)
    heartbeat = {"EVIDENCE__HEARTBEAT_SECONDS": "0.5"}
    one = _machine(tmp_path / "machine-1", bucket, location, evidence, **heartbeat)
    two = _machine(tmp_path / "machine-2", bucket, location, evidence, **heartbeat)

    server.faults.latency_ms = 80
    httpx.post(f"{server.base_url}/_sandbox/stats/reset")
    process = _start(["sync", "--no-models", "--base-url", server.base_url], one)
    pieces = evidence.split("/", 3)[3] + "syncs/"

    parts: dict[str, bytes] = {}

    def a_third_read_and_pushed() -> bool:
        # machine 1 has sent PUSHED of its manifest's entries: counted, not only a first
        # piece, since on a loaded machine that may hold a handful (its beats come late)
        return requests_answered(server) >= full // 3 and _pushed_entries(
            bucket, pieces, parts, tmp_path / "pushed") >= PUSHED

    try:
        kill_when(process, a_third_read_and_pushed, seconds=200)
    finally:
        server.faults.latency_ms = 0
    process.communicate()
    time.sleep(0.5 * 6 + 1)  # machine 1's heartbeat has stopped for longer than 6 beats

    httpx.post(f"{server.base_url}/_sandbox/stats/reset")
    resumed = _run(["sync", "--no-models", "--base-url", server.base_url], two)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming," in resumed.stderr or "not read again" in resumed.stderr, resumed.stderr
    # what machine 1 had sent is not asked again: only what it fetched since its last push
    # (every second, see PUSH_SECONDS), what was in flight, and the lists, asked again
    pushed = _pushed_entries(bucket, pieces, parts, tmp_path / "pushed")
    assert requests_answered(server) <= full - pushed + 8, (requests_answered(server), full, pushed)
    assert _current(location) == expected
    verified = _run(["verify"], one)  # machine 1 finds the chain machine 2 sealed, its own sync in it
    assert verified.returncode == 0, verified.stderr + verified.stdout
    assert "verified 2 syncs" in verified.stdout


@pytest.mark.timeout(900)
def test_the_bucket_gone_mid_load_fails_in_one_line_and_the_rerun_is_exact(
        server: SandboxServer, bucket: ObjectStore, lake_in_bucket: tuple[WarehouseLocation, str],
        tmp_path: Path) -> None:
    location, evidence = lake_in_bucket
    expected = _reference_current(server, tmp_path / "reference.duckdb")
    namespace = server.truth()["namespaces"][0]
    work, env = _machine(tmp_path / "machine-1", bucket, location, evidence)
    first = _run(["sync", "--no-models", "--base-url", server.base_url,
                  "--namespace", server.truth()["namespaces"][1]], (work, env))
    assert first.returncode == 0, first.stderr
    before = _current(location)

    signals = tmp_path / "signals"
    signals.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.lake.pausepoint", "1:insert into", str(signals), "--",
         "sync", "--no-models", "--base-url", server.base_url, "--namespace", namespace],
        cwd=work, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 200
        while not (signals / "reached").exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)
        bucket.relay.stop()  # the bucket goes away under the load
        (signals / "go").write_text("")
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        bucket.relay.start()
    assert process.returncode != 0
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err  # dlt's job retries: only --verbose
    assert f"loading namespace {namespace}" in lines[0], lines[0]
    assert "IOException" in lines[0] and "HTTP PUT" in lines[0], lines[0]  # the cause, not "aborted"

    assert _current(location) == before  # nothing of the namespace was committed
    con = lake.connect(location, read_only=True)
    try:
        runs = con.execute("select namespace_company_id, status from raw.sync_runs").fetchall()
    finally:
        con.close()
    assert (namespace, "success") not in runs

    rerun = _run(["sync", "--no-models", "--base-url", server.base_url], (work, env))
    assert rerun.returncode == 0, rerun.stderr
    assert _current(location) == expected
    _no_secret_anywhere(bucket, [tmp_path], [first.stdout, first.stderr, out, err,
                                             rerun.stdout, rerun.stderr])


def test_status_without_the_evidence_bucket_shows_this_machines_copy_with_a_line(
        server: SandboxServer, bucket: ObjectStore, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SOURCES__", "DILIGENCE_", "AWS_", "XDG_", "EVIDENCE__"))}
    env.update(bucket.env(), HOME=str(tmp_path), PYTHONPATH=str(REPO),
               DILIGENCE_WAREHOUSE=str(work / "warehouse.duckdb"),
               DILIGENCE_EVIDENCE=bucket.url("status_offline/evidence"),
               SOURCES__COMPANY_CONNECTIONS__EMAIL=DEFAULT_EMAIL,
               SOURCES__COMPANY_CONNECTIONS__PASSWORD=DEFAULT_PASSWORD)
    synced = _run(["sync", "--no-models", "--base-url", server.base_url], (work, env))
    assert synced.returncode == 0, synced.stderr
    bucket.relay.stop()
    try:
        shown = _run(["status", "--json"], (work, env))
    finally:
        bucket.relay.start()
    assert shown.returncode == 0, shown.stderr
    [line] = shown.stderr.splitlines()
    assert line.startswith("warning: cannot read the evidence store s3://") and line.endswith(
        "; the evidence shown is this machine's copy"), line
    assert json.loads(shown.stdout)["evidence"]["syncs"] == 1
