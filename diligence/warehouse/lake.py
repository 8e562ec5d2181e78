"""A warehouse that is a lake: validate, attach, load; and :func:`connect`, where DuckDB
is opened for every warehouse, a file or a lake.

A DuckLake warehouse is a PostgreSQL catalog (``ducklake:postgres:<libpq conninfo>``)
plus a data path for its Parquet files; :mod:`diligence.warehouse.location` parses the two.

The shape:

- :func:`~diligence.warehouse.location.parse_location` turns the two settings into a
  :class:`~diligence.warehouse.location.WarehouseLocation`, or raises
  :class:`~diligence.warehouse.location.WarehouseLocationError` (one line, never a password).
- :func:`check_location` proves a lake usable before anything is written: the data path
  takes a file and the catalog answers.
- :func:`connect` opens a DuckDB connection with the lake attached and selected
  (``USE``), so ``raw.*`` and ``analytics.*`` resolve exactly as in a DuckDB file: the
  models, checks and exports run unchanged on it.
- :func:`load_retrying` runs a namespace's load again after a commit conflict with a
  concurrent writer (:func:`is_commit_conflict`).
- :func:`analyst_attach_sql` is the read-only ATTACH analysts paste into DuckDB.

The extensions (ducklake, postgres) load from the ``duckdb-extension-*`` wheels, so no
network is needed. The catalog's metadata lives in PostgreSQL's default schema, the one a
plain ``ATTACH 'ducklake:postgres:...'`` uses, so the analysts' line and dlt's writers see
the same lake.
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import duckdb
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from ..errors import SECRET_KEYS, WarehouseLocationError, redact
from .filemodes import protect
from .location import (
    LAKE_PREFIX,
    WarehouseLocation,
    format_conninfo,
    is_remote_data_path,
    parse_conninfo,
)
from .paths import wal_of
from .sql import sql_string
from .storage import is_s3_url, object_storage, probe_writable

DEFAULT_ALIAS = "lake"
#: PostgreSQL's default schema, where a plain ATTACH keeps DuckLake's metadata tables.
METADATA_SCHEMA = "public"
#: Seconds libpq waits for the catalog before giving up, unless the conninfo says otherwise.
CONNECT_TIMEOUT_SECONDS = 10
RAW_DATASET = "raw"
EXTENSIONS = ("ducklake", "postgres", "httpfs")

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
_CONFLICT_MARKERS = ("Transaction conflict", "Failed to commit DuckLake transaction")
_installed: set[str] = set()
_install_lock = threading.Lock()


def check_location(location: WarehouseLocation) -> None:
    """Prove a lake usable before anything is written: its data path takes a file and its
    catalog answers. A DuckDB file's directory must be writable. Raises
    :class:`WarehouseLocationError`."""
    if not location.is_lake:
        assert location.path is not None
        _check_writable_dir(location.path.resolve().parent, "the warehouse's directory")
        return
    check_catalog(location)  # first: it writes nothing
    check_data_path(location)


def check_data_path(location: WarehouseLocation) -> None:
    """A local data path must be (or become) a directory that takes a file; an S3 URL
    must take an object with the configured credentials (see :mod:`.storage`); another
    object storage URL is checked by its first write."""
    assert location.data_path is not None
    if is_s3_url(location.data_path):
        probe_writable(location.data_path, object_storage(), "the data path")
        return
    if is_remote_data_path(location.data_path):
        return
    _check_writable_dir(Path(location.data_path), "the data path")


def check_catalog(location: WarehouseLocation) -> None:
    """Connect to the catalog database (no DuckLake attach), or raise one clear line."""
    assert location.conninfo is not None
    con = duckdb.connect()
    try:
        _load_extensions(con)
        try:
            con.execute(
                f"attach {sql_string(_with_timeout(location.conninfo))} "
                "as catalog_probe (type postgres, read_only)"
            )
        except duckdb.Error as exc:
            raise WarehouseLocationError(
                f"cannot reach the DuckLake catalog {location.display()}: {_first_line(exc)}"
            ) from None
    finally:
        con.close()


def _create_file(path: Path) -> None:
    """Create an empty DuckDB file at `path` all at once.

    DuckDB writes a new file's header only after creating the file, so a process killed
    in between would leave a file that no DuckDB opens, and every later command on the
    warehouse would fail. The file is made under a temporary name beside it, given its
    modes, then linked into place; a file another process made meanwhile wins.
    """
    partial = path.with_name(f".{path.name}.{os.getpid()}.new")
    try:
        duckdb.connect(str(partial)).close()
        protect(partial)
        try:
            os.link(partial, path)
        except FileExistsError:
            pass
    finally:
        partial.unlink(missing_ok=True)
        wal_of(partial).unlink(missing_ok=True)


def connect(
    location: WarehouseLocation,
    *,
    read_only: bool = False,
    alias: str = DEFAULT_ALIAS,
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to the warehouse. For a lake: an in-memory DuckDB with the lake
    attached as `alias` and selected with ``USE``, so unqualified ``raw.*`` and
    ``analytics.*`` resolve in it. The caller closes the connection."""
    if not location.is_lake:
        assert location.path is not None
        if not read_only and not location.path.exists():
            _create_file(location.path)
        return duckdb.connect(str(location.path), read_only=read_only)
    require_identifier(alias)
    storage = object_storage() if is_s3_url(location.data_path) else None
    con = duckdb.connect()
    try:
        _load_extensions(con)
        if storage is not None:  # in memory, this connection's only: never on disk
            con.execute(storage.duckdb_secret_sql())
        con.execute(_attach_sql(location, alias, read_only=read_only, with_timeout=True))
        con.execute(f"use {alias}")
    except duckdb.Error as exc:
        con.close()
        raise WarehouseLocationError(
            f"cannot open the DuckLake {location.display()}: {redact(_first_line(exc), storage.secrets if storage is not None else ())}"
        ) from None
    except BaseException:
        con.close()
        raise
    return con


def initialise(
    location: WarehouseLocation,
    schemas: tuple[str, ...] = (RAW_DATASET,),
    *,
    con: duckdb.DuckDBPyConnection | None = None,
) -> None:
    """Create the lake's catalog (on first use) and `schemas`, as one process, before
    concurrent writers start: two writers initialising an empty catalog at once collide
    in PostgreSQL. Idempotent. A DuckDB file needs nothing.

    With `con` (a writable :func:`connect` of `location`, already checked with
    :func:`check_location`; the caller keeps it) the schemas are made through it, so the
    caller's step attaches the lake once; without, a connection of its own is opened
    and closed."""
    if not location.is_lake:
        return
    for schema in schemas:
        require_identifier(schema)
    own = con is None
    if own:
        check_location(location)
        con = connect(location)
    try:
        for schema in schemas:
            con.execute(f"create schema if not exists {schema}")
    finally:
        if own:
            con.close()


def initialise_retrying(
    location: WarehouseLocation,
    schemas: tuple[str, ...] = (RAW_DATASET,),
    *,
    con: duckdb.DuckDBPyConnection | None = None,
    attempts: int = 6,
    backoff_seconds: float = 0.3,
) -> None:
    """:func:`initialise`, retried when another process initialises the same empty
    catalog at the same moment (one of the two then finds a duplicate key or a commit
    conflict; the next attempt finds the catalog made)."""
    retrying = Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=backoff_seconds, max=5),
        retry=retry_if_exception(_racing_initialise),
        reraise=True,
    )
    try:
        retrying(initialise, location, schemas, con=con)
    except duckdb.Error as exc:
        raise WarehouseLocationError(
            f"cannot initialise the DuckLake {location.display()}: {_first_line(exc)}"
        ) from None


def connect_retrying(
    location: WarehouseLocation,
    *,
    attempts: int = 6,
    backoff_seconds: float = 0.3,
) -> duckdb.DuckDBPyConnection:
    """A writable :func:`connect`, retried when another process attaches the same empty
    catalog at the same moment (the first ATTACH of a catalog creates its metadata
    tables; one of two racing processes then finds a duplicate key or a conflict)."""
    return Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=backoff_seconds, max=5),
        retry=retry_if_exception(_racing_initialise),
        reraise=True,
    )(connect, location)


def _racing_initialise(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, (WarehouseLocationError, duckdb.Error)) and (
        is_commit_conflict(exc) or "duplicate key" in text or "already exists" in text
    )


def is_commit_conflict(exc: BaseException) -> bool:
    """True when `exc` (or what caused it) is a transient DuckLake commit conflict between
    concurrent writers: two runs creating the same table or column, or committing to the
    same table at once. Retrying the load is safe: dlt re-reads the destination and
    applies only what is missing."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ == "SchemaUpdateError":
            return True
        text = str(current)
        if any(marker in text for marker in _CONFLICT_MARKERS):
            return True
        current = current.__cause__ or current.__context__
    return False


def load_retrying(
    load: Callable[[], Any],
    *,
    attempts: int = 6,
    backoff_seconds: float = 0.5,
) -> Any:
    """``load()``; on a transient commit conflict (see :func:`is_commit_conflict`) call it
    again, up to `attempts` in all, with jittered exponential backoff. `load` must start
    from nothing each time (a namespace's whole run, in one transaction that the
    conflict rolled back: :func:`diligence.sync._load`). Returns what it returns."""
    return Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=backoff_seconds, max=30),
        retry=retry_if_exception(is_commit_conflict),
        reraise=True,
    )(load)


def catalog_url(location: WarehouseLocation) -> str:
    """The catalog conninfo as the ``postgres://`` URL dlt's ducklake credentials take
    (it holds the password if the conninfo does: never log it; use :func:`redact`)."""
    assert location.conninfo is not None
    pairs = parse_conninfo(_with_timeout(location.conninfo))
    user = pairs.pop("user", "")
    password = pairs.pop("password", "")
    host = pairs.pop("host", "")
    port = pairs.pop("port", "")
    dbname = pairs.pop("dbname")
    userinfo = ""
    if user:
        userinfo = quote(user, safe="")
        if password:
            userinfo += ":" + quote(password, safe="")
        userinfo += "@"
    netloc = userinfo
    if host and not host.startswith("/"):
        netloc += host + (f":{port}" if port else "")
    else:
        if host:
            pairs["host"] = host
        if port:
            pairs["port"] = port
    query = f"?{urlencode(pairs)}" if pairs else ""
    return f"postgres://{netloc}/{quote(dbname, safe='')}{query}"


def analyst_attach_sql(location: WarehouseLocation, alias: str = DEFAULT_ALIAS) -> str:
    """The lines an analyst runs in DuckDB (1.5.5, with the ducklake and postgres
    extensions) to read the lake; passwords are redacted: supply yours via PGPASSWORD
    or ~/.pgpass. A data path in S3 adds httpfs and a secret made from the analyst's own
    ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (read by the ``duckdb`` shell's
    ``getenv``), with this lake's endpoint and addressing."""
    if not location.is_lake:
        raise WarehouseLocationError(
            f"{location.display()} is a DuckDB file: analysts open its published copy"
        )
    require_identifier(alias)
    conninfo = _strip_secrets(location.conninfo or "")
    in_bucket = is_s3_url(location.data_path)
    return "\n".join(
        (
            "INSTALL ducklake; INSTALL postgres; LOAD ducklake; LOAD postgres;",
            *(("INSTALL httpfs; LOAD httpfs;", object_storage().analyst_secret_sql())
              if in_bucket else ()),
            f"ATTACH {sql_string(LAKE_PREFIX + conninfo)} AS {alias} "
            f"(DATA_PATH {sql_string(location.data_path or '')}, READ_ONLY);",
            f"USE {alias};",
        )
    )


def _attach_sql(
    location: WarehouseLocation, alias: str, *, read_only: bool, with_timeout: bool
) -> str:
    conninfo = location.conninfo or ""
    if with_timeout:
        conninfo = _with_timeout(conninfo)
    options = [f"DATA_PATH {sql_string(location.data_path or '')}"]
    if read_only:
        options.append("READ_ONLY")
    return (
        f"attach {sql_string(LAKE_PREFIX + conninfo)} as {alias} ({', '.join(options)})"
    )


def install_extensions() -> None:
    """Install the lake's extensions from their wheels into DuckDB's extension directory,
    once per process (a no-op once any connection of this module has done it)."""
    with _install_lock:
        if all(name in _installed for name in EXTENSIONS):
            return
    with duckdb.connect() as probe:
        _load_extensions(probe)


def _load_extensions(con: duckdb.DuckDBPyConnection) -> None:
    """Install the lake's extensions from their wheels (once per process) and load them."""
    with _install_lock:
        for name in EXTENSIONS:
            if name not in _installed:
                try:
                    import duckdb_extensions  # optional wheel: its absence is the error below

                    duckdb_extensions.import_extension(name, con=con)
                except (ImportError, duckdb.Error) as exc:
                    raise WarehouseLocationError(
                        f"cannot install DuckDB's {name} extension from its wheel "
                        f"(duckdb-extension-{name}=={duckdb.__version__}): {_first_line(exc)}"
                    ) from None
                _installed.add(name)
    for name in EXTENSIONS:
        con.execute(f"load {name}")


def _with_timeout(conninfo: str) -> str:
    pairs = parse_conninfo(conninfo)
    pairs.setdefault("connect_timeout", str(CONNECT_TIMEOUT_SECONDS))
    return format_conninfo(pairs)


def _strip_secrets(conninfo: str) -> str:
    pairs = parse_conninfo(conninfo)
    return format_conninfo({k: v for k, v in pairs.items() if k not in SECRET_KEYS})


def _check_writable_dir(directory: Path, what: str) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".diligence-write-probe-{uuid.uuid4().hex}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise WarehouseLocationError(f"{what} {directory} cannot be written: {reason}") from None


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return redact(lines[0] if lines else type(exc).__name__)


def require_identifier(name: str) -> None:
    """Raise :class:`WarehouseLocationError` unless `name` is a plain lowercase identifier."""
    if not _IDENTIFIER.fullmatch(name):
        raise WarehouseLocationError(f"{name!r} is not a plain lowercase identifier")


__all__ = [
    "analyst_attach_sql",
    "catalog_url",
    "check_catalog",
    "check_data_path",
    "check_location",
    "connect",
    "connect_retrying",
    "initialise",
    "initialise_retrying",
    "install_extensions",
    "is_commit_conflict",
    "load_retrying",
    "require_identifier",
]
