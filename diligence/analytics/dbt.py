"""dbt, run in this process through its Python API (``dbtRunner``) on the project in `sql/`.

No user writes a ``profiles.yml`` to use the CLI: :func:`profile` generates one for the
warehouse in use. DuckDB runs in memory with the warehouse attached as catalog
``warehouse`` (the file, or the DuckLake through dbt-duckdb's ``attach``), so every
relation dbt compiles reads ``"warehouse"."<schema>"."<table>"`` whatever the warehouse:

    target     the marts as          used by
    build      analytics.<name>__build  the model build and its checks (diligence.analytics.models
                                     renames them over the published tables in one
                                     transaction once the whole build has succeeded)
    analytics  analytics.<name>      the data tests, docs, source freshness, users' runs

Staging views live in schema `staging` for both (`sql/macros/generate_alias_name.sql`
names the build's tables).

Secrets: a lake's catalog password is never written into the profile (nor into
`target/`): it reaches libpq through ``PGPASSWORD`` for the invocation only, as for the
analysts' own ``ATTACH``. A data path in S3 gets the object storage's keys the same way:
the profile's ``secrets`` entry names ``env_var('DBT_ENV_SECRET_S3_...')``, set for the
invocation only (dbt scrubs ``DBT_ENV_SECRET_`` values from its logs). The lake's DuckDB extensions are installed from their wheels
first (:func:`diligence.warehouse.lake.install_extensions`), so DuckDB loads them without a
download.

Start-up: importing dbt takes about 2 s and parsing the project about 3 s. The parse is
kept in ``sql/target/diligence-<target>/`` (dbt's partial parsing: about 1 s when nothing
changed; in the user's cache for a package installed read-only, see :func:`parse_root`); it is made with one fixed profile, since dbt discards it when the profile's
values change (the warehouse's path would), and within one process the parsed manifest
is reused for every invocation. A sync has both done in the process its models then build
in, while it waits on the service (:func:`prepare`, through
:func:`diligence.analytics.warm_up` and :mod:`diligence.analytics.aside`).
Build parameters (``as_of``, ``expiring_within_days``) are passed as dbt vars of the
invocation, not of the parse, so they never cost a new parse. Parses of one checkout are
serialised (a lock file in `sql/target/`), since they share its parse folders.

Artifacts: the build leaves dbt's target folder for its warehouse in one place,
:func:`artifacts_dir` (``data/warehouse.duckdb`` -> ``data/warehouse.dbt/``), replaced
by the next build whether it succeeds or not: ``manifest.json``, ``run_results.json``,
the compiled and run SQL (``compiled/``, ``run/``) and ``dbt.log``. A failing model's
message names its SQL there. With ``diligence dbt-profile`` a person runs plain dbt on
the warehouse, and ``--state`` that folder selects what changed since
(``state:modified+``). Other invocations (checks, docs, freshness) write into a private
folder of their own, removed afterwards.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import SECRET_KEYS, DbtError
from ..warehouse.filemodes import make_dirs, protect_tree, write_text_atomically
from ..warehouse.location import WarehouseLocation, format_conninfo, parse_conninfo, parse_location
from ..warehouse.lock import process_alive, reader_lock
from ..warehouse.paths import artifacts_of
from ..warehouse.storage import is_s3_url, object_storage

PROJECT_DIR = Path(__file__).resolve().parents[2] / "sql"
PROFILE_NAME = "diligence"
CATALOG = "warehouse"
ANALYTICS_SCHEMA = "analytics"
#: The build's tables are `analytics.<name><BUILD_SUFFIX>` (sql/macros/generate_alias_name.sql).
BUILD_SUFFIX = "__build"
STAGING_SCHEMA = "staging"
TARGETS = {"build": ANALYTICS_SCHEMA, "analytics": ANALYTICS_SCHEMA}
#: Nodes dbt runs side by side on a DuckDB file (each on its own cursor of the one
#: DuckDB): dbt's own Python of one node then overlaps DuckDB's work on another. With 2,
#: a `large` build under the models' memory limit takes about 6.5 s instead of 9.6 s,
#: within that limit. A DuckLake gets one: its concurrent commits conflict ("Failed to
#: commit DuckLake transaction").
DBT_THREADS = 2
#: Seconds libpq waits for the lake's catalog before giving up.
CONNECT_TIMEOUT_SECONDS = 10

#: The warehouse of the profile dbt parses with (never opened: parsing does not connect).
PARSE_LOCATION = WarehouseLocation(path=Path("/dev/null/warehouse.duckdb"))

_lock = threading.Lock()
_manifests: dict[tuple[str, str], Any] = {}


@dataclass(frozen=True)
class NodeResult:
    """One node of an invocation: a model, a test or a source."""

    name: str
    resource_type: str  # "model", "test", "source"
    schema: str
    status: str  # dbt's: success, error, skipped, pass, fail, warn, runtime error
    message: str | None
    seconds: float
    failures: int | None = None
    #: a model's materialization (``table``, ``view``, ...); None for other nodes
    materialized: str | None = None
    #: a model's compiled SELECT (None when it was not compiled)
    compiled_code: str | None = None
    #: the SQL file dbt ran for the node (``<target>/run/...``), else the compiled one,
    #: relative to the invocation's target folder (None when none was written)
    sql_path: str | None = None


@dataclass(frozen=True)
class DbtRun:
    """What one dbt invocation did."""

    success: bool
    nodes: list[NodeResult] = field(default_factory=list)
    error: str | None = None  # why dbt could not run at all (parse, compile, connect)
    result: Any = None  # dbt's own result (e.g. the catalog of `docs generate`)

    def first_failure(self) -> NodeResult | None:
        for node in self.nodes:
            if node.status in ("error", "fail", "runtime error"):
                return node
        return None


@dataclass(frozen=True)
class Description:
    """What a model's YAML says about its table and columns."""

    table: str
    columns: dict[str, str]


def profile(
    location: WarehouseLocation,
    *,
    memory_limit: str | None = None,
    duckdb_threads: int | None = None,
    targets: Sequence[str] = ("build", "analytics"),
    default_target: str = "analytics",
    read_only: bool = False,
) -> dict[str, Any]:
    """The dbt profile for `location` (no password in it, see the module docstring)."""
    attach: dict[str, Any] = {"alias": CATALOG}
    if read_only:
        attach["read_only"] = True
    if location.is_lake:
        pairs = {k: v for k, v in parse_conninfo(location.conninfo or "").items() if k not in SECRET_KEYS}
        pairs.setdefault("connect_timeout", str(CONNECT_TIMEOUT_SECONDS))
        attach["path"] = "ducklake:postgres:" + format_conninfo(pairs)
        attach["options"] = {"data_path": location.data_path or ""}
    else:
        assert location.path is not None
        attach["path"] = str(location.path.expanduser().resolve())
    # unqualified names (see sql/macros/relations.sql) resolve in the warehouse
    settings: dict[str, Any] = {"search_path": f"{CATALOG}.main"}
    if memory_limit is not None:
        settings["memory_limit"] = memory_limit
        if duckdb_threads is not None:
            settings["threads"] = int(duckdb_threads)
    outputs = {}
    for target in targets:
        output: dict[str, Any] = {
            "type": "duckdb",
            "path": ":memory:",
            "database": CATALOG,
            "schema": TARGETS[target],
            "threads": 1 if location.is_lake else DBT_THREADS,
            "attach": [attach],
        }
        if is_s3_url(location.data_path):
            output["secrets"] = [object_storage().dbt_secret()[0]]
        output["settings"] = settings
        outputs[target] = output
    return {PROFILE_NAME: {"target": default_target, "outputs": outputs}}


def profile_yaml(location: WarehouseLocation) -> str:
    """A ``profiles.yml`` for the user's own dbt runs on `location` (target `analytics`)."""
    text = yaml.safe_dump(
        profile(location, targets=("analytics",)), sort_keys=False, default_flow_style=False
    )
    if is_s3_url(location.data_path):
        text = ("# the object storage's keys: set DBT_ENV_SECRET_S3_KEY_ID and "
                "DBT_ENV_SECRET_S3_SECRET (never in this file)\n" + text)
    if location.is_lake:
        text = "# the catalog's password: set PGPASSWORD (never in this file)\n" + text
    return text


def merge_profile(path: Path, location: WarehouseLocation) -> Path:
    """Write the profile of :func:`profile_yaml` into the ``profiles.yml`` at `path`: the
    ``diligence`` profile is added or replaced, every other profile is kept as it was.
    Raises :class:`DbtError` when the existing file is not a YAML mapping of profiles."""
    path = Path(path).expanduser()
    profiles: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise DbtError(f"{path} is not YAML ({_first_line(exc)}); nothing was written") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise DbtError(f"{path} does not hold dbt profiles (a mapping); nothing was written")
        profiles = loaded or {}
    profiles.update(yaml.safe_load(profile_yaml(location)))
    text = yaml.safe_dump(profiles, sort_keys=False, default_flow_style=False)
    if location.is_lake:
        text = "# the catalog's password: set PGPASSWORD (never in this file)\n" + text
    return write_text_atomically(path, text)


def artifacts_dir(location: WarehouseLocation) -> Path:
    """Where the builds of `location` leave dbt's target folder: beside the warehouse
    file (``data/warehouse.duckdb`` -> ``data/warehouse.dbt``), beside a lake's local
    data path (``<data path>.dbt``), or, for a lake in object storage, in the user's cache
    (``$XDG_CACHE_HOME/diligence/lake-<hash of the catalog>.dbt``)."""
    if location.path is not None:
        return artifacts_of(location.path.expanduser())
    data_path = str(location.data_path or "").rstrip("/")
    if data_path and "://" not in data_path:
        local = Path(data_path).expanduser()
        return local.with_name(local.name + ".dbt")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(location.display().encode()).hexdigest()[:12]
    return cache / "diligence" / f"lake-{digest}.dbt"


@contextlib.contextmanager
def new_artifacts(location: WarehouseLocation) -> Iterator[Path]:
    """A new target folder for a build of `location`; when the block ends, however it
    ends, it replaces the previous build's :func:`artifacts_dir` in one rename (a reader
    sees the old folder or the new one). Folders a killed build left are removed first
    (those of a build still running, of a lake, are left to it)."""
    final = artifacts_dir(location).absolute()  # dbt reads a relative one from sql/
    make_dirs(final.parent)
    for stale in final.parent.glob(f".{final.name}.*"):
        owner = re.search(r"\.(?:new|old)-(\d+)", stale.name)
        pid = int(owner.group(1)) if owner else None
        if pid is None or pid == os.getpid() or not process_alive(pid):
            shutil.rmtree(stale, ignore_errors=True)
    building = Path(tempfile.mkdtemp(prefix=f".{final.name}.new-{os.getpid()}-", dir=final.parent))
    try:
        yield building
    finally:
        protect_tree(building)
        previous = final.with_name(f".{final.name}.old-{os.getpid()}")
        if final.is_dir():
            os.replace(final, previous)
        os.replace(building, final)
        shutil.rmtree(previous, ignore_errors=True)


def invoke(
    command: Sequence[str],
    location: WarehouseLocation,
    *,
    target: str = "analytics",
    variables: dict[str, Any] | None = None,
    memory_limit: str | None = None,
    duckdb_threads: int | None = None,
    project_dir: Path = PROJECT_DIR,
    read_only: bool = False,
    target_path: Path | None = None,
) -> DbtRun:
    """Run one dbt command (``["run"]``, ``["test", "--select", "x"]``, ...) on `location`.

    Never raises for a failing model or test (see :attr:`DbtRun.success`); raises
    :class:`DbtError` when dbt cannot run at all. `read_only` attaches the warehouse
    read-only (tests, docs, source freshness). With `target_path`, dbt leaves its
    artifacts there (``manifest.json``, ``run_results.json``, compiled and run SQL,
    ``dbt.log``); without, it writes no JSON and its files go to a private folder
    removed afterwards.
    """
    if location.is_lake:
        from ..warehouse.lake import install_extensions

        install_extensions()
    reading = reader_lock(location.path) if read_only and location.path is not None else contextlib.nullcontext()
    with reading, _lock, _profiles_dir(
        profile(
            location,
            memory_limit=memory_limit,
            duckdb_threads=duckdb_threads,
            targets=(target,),
            default_target=target,
            read_only=read_only,
        )
    ) as profiles_dir, _secrets_in_environment(location):
        # imported under the lock, as a parse does: two threads importing dbt's
        # modules at once can each get one of them half-initialised
        from dbt.adapters.duckdb.connections import DuckDBConnectionManager
        from dbt.cli.main import dbtRunner

        try:
            manifest = _manifest(project_dir, target)
            args = [*command, *_common_args(project_dir, target, profiles_dir,
                                            target_path or profiles_dir / "target",
                                            write_json=target_path is not None)]
            if variables:
                args += ["--vars", yaml.safe_dump(variables, default_flow_style=True).strip()]
            outcome = dbtRunner(manifest=manifest).invoke(args)
        finally:
            # the in-memory DuckDB (and the warehouse it attached) is closed after every
            # invocation: the next step opens the file itself
            DuckDBConnectionManager.close_all_connections()
    if outcome.exception is not None:
        return DbtRun(success=False, error=_first_line(outcome.exception))
    return DbtRun(success=bool(outcome.success), nodes=_nodes(outcome.result, target_path),
                  result=outcome.result)


def render_macro(name: str, *arguments: str | list[str] | dict[str, str], project_dir: Path = PROJECT_DIR,
                 target: str = "analytics") -> str:
    """The SQL that the project's macro `name` expands to for `arguments` (SQL text, e.g.
    column names or ``?`` placeholders, or lists and mappings of them), so Python-side
    queries apply the project's own rule rather than a copy of it. Compiled inline (``dbt
    compile --inline``) with the parse of `target` (a model build's, in its process), with
    no warehouse opened."""
    return render_macros([(name, arguments)], project_dir=project_dir, target=target)[0]


#: between two macros' SQL in one inline compile (a comment no macro writes)
_NEXT_MACRO = "/* diligence: next macro */"


def render_macros(calls: Sequence[tuple[str, Sequence[str | list[str] | dict[str, str]]]], *,
                  project_dir: Path = PROJECT_DIR, target: str = "analytics") -> list[str]:
    """:func:`render_macro` of each (name, arguments) in `calls`, in one dbt invocation
    (each costs about 50 ms of dbt's set-up however small the macro)."""
    if not calls:
        return []
    template = f"\n{_NEXT_MACRO}\n".join(
        "{{ " + name + "(" + ", ".join(repr(argument) for argument in arguments) + ") }}"
        for name, arguments in calls)
    run = invoke(["compile", "--inline", template, "--no-introspect", "--no-populate-cache"],
                 PARSE_LOCATION, target=target, project_dir=project_dir, read_only=True)
    names = ", ".join(dict.fromkeys(name for name, _ in calls))
    if not run.success or not run.result or not run.result.results:
        # dbt keeps the failed inline node in the manifest it was given, and every later
        # inline compile of this process would fail on it: parse afresh next time
        forget_parse(project_dir)
        raise DbtError(f"dbt could not render macro {names}: {run.error or 'no result'}")
    rendered = [part.strip() for part in str(run.result.results[0].node.compiled_code).split(_NEXT_MACRO)]
    if len(rendered) != len(calls):  # a macro wrote the separator itself
        raise DbtError(f"dbt rendered {len(rendered)} parts for {len(calls)} macros ({names})")
    return rendered


def descriptions(target: str = "build", project_dir: Path = PROJECT_DIR) -> dict[str, Description]:
    """The YAML descriptions of the models this process last parsed for `target`, by
    model name (models without any description are left out)."""
    manifest = _manifests.get((str(project_dir), target))
    described: dict[str, Description] = {}
    for node in getattr(manifest, "nodes", {}).values():
        if getattr(node.resource_type, "value", "") != "model":
            continue
        columns = {name: column.description for name, column in node.columns.items() if column.description}
        if node.description or columns:
            described[node.name] = Description(table=node.description, columns=columns)
    return described


def location_of(warehouse: Any) -> WarehouseLocation:
    """The location of a DuckDB file path, a parsed location, or a Warehouse."""
    if isinstance(warehouse, WarehouseLocation):
        return warehouse
    location = getattr(warehouse, "location", None)
    if isinstance(location, WarehouseLocation):
        return location
    return parse_location(str(warehouse), None)


def prepare(target: str = "build", project_dir: Path = PROJECT_DIR) -> Any:
    """Import dbt and parse `project_dir` for `target`, unless this process has already
    (the parse is then reused by every invocation); returns dbt's manifest. The process
    a sync's models build in calls it as it starts, beside the sync's fetch
    (:mod:`diligence.analytics.aside`), so the build after the load starts at once."""
    with _lock:
        return _manifest(project_dir, target)


def _manifest(project_dir: Path, target: str) -> Any:
    """The project parsed for `target`, parsed at most once per process (the caller holds
    this process's lock; the parse takes the checkout's).

    dbt keeps a parse for the next process (partial parsing) only while the profile's
    connection values are the same; the warehouse's path and memory limit are not needed
    to parse, so the parse gets a fixed profile (never connected to) and the run its real
    one, with the parsed manifest."""
    from dbt.cli.main import dbtRunner

    key = (str(project_dir), target)
    if key not in _manifests:
        fixed = profile(PARSE_LOCATION, targets=(target,), default_target=target)
        parse_dir = parse_root(project_dir) / f"diligence-{target}"
        with _checkout_lock(project_dir), _profiles_dir(fixed) as parse_profiles:
            parsed = dbtRunner().invoke(
                ["parse", *_common_args(project_dir, target, parse_profiles, parse_dir)])
        if not parsed.success or parsed.result is None:
            raise DbtError(f"dbt could not parse {project_dir.name}/: {_first_line(parsed.exception)}")
        _manifests[key] = parsed.result
    return _manifests[key]


def _common_args(project_dir: Path, target: str, profiles_dir: Path, target_dir: Path,
                 *, write_json: bool = False) -> list[str]:
    """The arguments of every invocation for `target`: its target and log folder
    `target_dir`, nothing on stdout (results come back as objects), dbt's JSON artifacts
    only when `write_json`."""
    target_dir.mkdir(parents=True, exist_ok=True)
    return [
        "--project-dir", str(project_dir),
        "--profiles-dir", str(profiles_dir),
        "--target", target,
        "--target-path", str(target_dir),
        "--log-path", str(target_dir),
        "--log-level", "none",
        "--log-level-file", "warn",
        "--no-send-anonymous-usage-stats",
        "--no-use-colors",
        "--write-json" if write_json else "--no-write-json",
    ]


def parse_root(project_dir: Path = PROJECT_DIR) -> Path:
    """Where the parses of `project_dir` are kept: its ``target/`` (a checkout, or a
    package installed where its user may write), else a folder of the user's cache, for
    a package installed read-only (``$XDG_CACHE_HOME/diligence/dbt-<hash of the path>``)."""
    target = project_dir / "target"
    if os.access(target if target.exists() else project_dir, os.W_OK):
        return target
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(str(project_dir.resolve()).encode()).hexdigest()[:12]
    return cache / "diligence" / f"dbt-{digest}"


def forget_parse(project_dir: Path = PROJECT_DIR) -> None:
    """Drop this process's parsed manifests of `project_dir` (after its files changed)."""
    for key in [k for k in _manifests if k[0] == str(project_dir)]:
        del _manifests[key]


def describe_failure(run: DbtRun, doing: str) -> str:
    """One line: what failed, naming the model or test, with dbt's first line of error."""
    failed = run.first_failure()
    if failed is not None:
        kind = "test" if failed.resource_type == "test" else failed.resource_type
        detail = _first_line(failed.message) if failed.message else failed.status
        if failed.status == "fail":
            detail = f"{failed.failures} offending row{'s' if failed.failures != 1 else ''}"
        return f"{doing} failed: {kind} {failed.name}: {detail}"
    return f"{doing} failed: {run.error or 'dbt reported a failure'}"


def _sql_path(node: Any, target_path: Path | None) -> str | None:
    """The SQL file dbt ran for `node` (else compiled), relative to `target_path`."""
    if target_path is None:
        return None
    for written in (getattr(node, "build_path", None), getattr(node, "compiled_path", None)):
        if not written:
            continue
        path = Path(written) if Path(written).is_absolute() else target_path / written
        with contextlib.suppress(ValueError):
            relative = path.relative_to(target_path)
            if path.is_file():
                return str(relative)
    return None


def _nodes(result: Any, target_path: Path | None = None) -> list[NodeResult]:
    nodes: list[NodeResult] = []
    for item in getattr(result, "results", None) or []:
        node = item.node
        status = getattr(item.status, "value", str(item.status))
        nodes.append(
            NodeResult(
                name=node.name,
                resource_type=getattr(node.resource_type, "value", str(node.resource_type)),
                schema=getattr(node, "schema", ""),
                status=str(status).lower(),
                message=item.message,
                seconds=float(item.execution_time or 0.0),
                failures=item.failures,
                materialized=getattr(getattr(node, "config", None), "materialized", None),
                compiled_code=getattr(node, "compiled_code", None),
                sql_path=_sql_path(node, target_path),
            )
        )
    return nodes


@contextlib.contextmanager
def _profiles_dir(content: dict[str, Any]) -> Iterator[Path]:
    """A private directory holding the generated profiles.yml, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="diligence-dbt-") as directory:
        path = Path(directory)
        (path / "profiles.yml").write_text(yaml.safe_dump(content, sort_keys=False), encoding="utf-8")
        yield path


@contextlib.contextmanager
def _checkout_lock(project_dir: Path) -> Iterator[None]:
    """The checkout's parse folders to this process alone (a parse reads and rewrites
    dbt's partial-parse file)."""
    lock_path = parse_root(project_dir) / ".diligence.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _secrets_in_environment(location: WarehouseLocation) -> Iterator[None]:
    """The secrets the profile leaves out, in the environment while dbt runs, as before
    it afterwards: a lake's catalog password as ``PGPASSWORD`` (libpq reads it), and for
    a data path in S3 the object storage's keys as ``DBT_ENV_SECRET_*`` (the profile
    names them with ``env_var``; dbt scrubs such variables from its logs and artifacts)."""
    environment: dict[str, str] = {}
    password = parse_conninfo(location.conninfo).get("password") if location.is_lake and location.conninfo else None
    if password:
        environment["PGPASSWORD"] = password
    if is_s3_url(location.data_path):
        environment.update(object_storage().dbt_secret()[1])
    previous = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _first_line(error: BaseException | str | None) -> str:
    text = str(error or "").strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # dbt prefixes "Runtime Error in model x (path)"; the database's own line follows
    for line in lines:
        if not line.startswith(("Runtime Error", "Database Error", "Compilation Error")):
            return line
    return lines[0] if lines else "unknown error"
