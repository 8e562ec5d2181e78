"""Where the warehouse lives: a DuckDB file or a DuckLake, parsed, never opened.

A warehouse location is either a DuckDB file path (the default) or a DuckLake whose
catalog is PostgreSQL, spelled as DuckDB spells it: ``ducklake:postgres:<libpq conninfo>``
(for example ``ducklake:postgres:dbname=lake host=db.internal user=loader``). A lake also
needs a data path for its Parquet files: a local directory or an object-storage URL.

:func:`parse_location` turns the two settings into a :class:`WarehouseLocation`, or
raises :class:`WarehouseLocationError` (one line, never a password). Nothing here
imports DuckDB or dlt, so every command can know where its warehouse is before it pays
for opening one; :mod:`diligence.warehouse.lake` checks, attaches and loads a lake.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SECRET_KEYS, WarehouseLocationError, redact

LAKE_PREFIX = "ducklake:postgres:"
#: conninfo keys whose values are secrets

_REMOTE_DATA_PATH = re.compile(r"^(s3|s3a|gcs|gs|az|azure|abfss|r2|hf)://[^/\s]+", re.IGNORECASE)
_KEYWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class WarehouseLocation:
    """A parsed warehouse location: a DuckDB file, or a DuckLake with its data path."""

    path: Path | None = None  # the DuckDB file; None for a lake
    conninfo: str | None = field(default=None, repr=False)  # libpq conninfo of the catalog
    data_path: str | None = None  # the lake's Parquet files: a directory or a URL

    @property
    def is_lake(self) -> bool:
        return self.conninfo is not None

    @property
    def uri(self) -> str:
        """The location as given to ``ATTACH`` (holds the password if the conninfo does)."""
        if self.conninfo is None:
            return str(self.path)
        return LAKE_PREFIX + self.conninfo

    def display(self) -> str:
        """The location for messages and logs: passwords redacted."""
        return redact(self.uri)

    def __repr__(self) -> str:
        if self.conninfo is None:
            return f"WarehouseLocation(path={str(self.path)!r})"
        return f"WarehouseLocation(uri={self.display()!r}, data_path={self.data_path!r})"

    __str__ = display


def is_lake_uri(location: str | Path) -> bool:
    """True when `location` names a DuckLake rather than a DuckDB file."""
    return isinstance(location, str) and location.strip().lower().startswith("ducklake:")


def parse_location(
    location: str | Path, data_path: str | Path | None = None
) -> WarehouseLocation:
    """Parse ``--warehouse`` and ``--data-path``.

    A location starting with ``ducklake:`` must be ``ducklake:postgres:<conninfo>`` with
    a well-formed conninfo naming a ``dbname``, and needs a data path; anything else is a
    DuckDB file path (a data path is then an error: it would be silently ignored).
    """
    if isinstance(location, Path) or not is_lake_uri(location):
        text = str(location).strip()
        if not text:
            raise WarehouseLocationError("the warehouse location is empty")
        if data_path is not None and str(data_path).strip():
            raise WarehouseLocationError(
                f"a data path is only used by a DuckLake warehouse, not by the DuckDB file {text}"
            )
        return WarehouseLocation(path=Path(text).expanduser())
    stripped = location.strip()
    if not stripped.lower().startswith(LAKE_PREFIX):
        scheme = ":".join(stripped.split(":", 2)[:2])
        raise WarehouseLocationError(
            f"unsupported warehouse URI {scheme}:...: "
            f"expected {LAKE_PREFIX}<conninfo>, e.g. {LAKE_PREFIX}dbname=lake host=db user=loader"
        )
    conninfo = stripped[len(LAKE_PREFIX) :].strip()
    pairs = parse_conninfo(conninfo)
    if not pairs.get("dbname"):
        raise WarehouseLocationError(
            f"the DuckLake catalog {redact(stripped)!r} names no database: add dbname=<name>"
        )
    if data_path is None or not str(data_path).strip():
        raise WarehouseLocationError(
            "a DuckLake warehouse needs a data path for its Parquet files: "
            "--data-path DIR (or [warehouse] data_path, DILIGENCE_DATA_PATH)"
        )
    return WarehouseLocation(conninfo=conninfo, data_path=normalise_data_path(data_path))


def parse_conninfo(conninfo: str) -> dict[str, str]:
    """libpq's ``key=value`` conninfo (values may be single-quoted, with backslash
    escapes) as a dict; a malformed one raises :class:`WarehouseLocationError`."""
    # A malformed conninfo may hold a password where a key should be: never echo its text.
    if not conninfo:
        raise WarehouseLocationError(f"the DuckLake URI has no conninfo after {LAKE_PREFIX!r}")
    if "://" in conninfo:
        raise WarehouseLocationError(
            "the DuckLake catalog must be a libpq conninfo (key=value ...), not a URL"
        )
    pairs: dict[str, str] = {}
    position, length = 0, len(conninfo)
    while position < length:
        while position < length and conninfo[position].isspace():
            position += 1
        if position >= length:
            break
        match = _KEYWORD.match(conninfo, position)
        if not match:
            raise WarehouseLocationError(
                f"malformed DuckLake conninfo: expected key=value at character {position + 1}"
            )
        key = match.group(0).lower()
        position = match.end()
        while position < length and conninfo[position].isspace():
            position += 1
        if position >= length or conninfo[position] != "=":
            raise WarehouseLocationError(
                f"malformed DuckLake conninfo: a key has no '=value' at character {position + 1}"
            )
        position += 1
        while position < length and conninfo[position].isspace():
            position += 1
        value: list[str] = []
        if position < length and conninfo[position] == "'":
            position += 1
            closed = False
            while position < length:
                char = conninfo[position]
                if char == "\\" and position + 1 < length:
                    value.append(conninfo[position + 1])
                    position += 2
                    continue
                if char == "'":
                    closed = True
                    position += 1
                    break
                value.append(char)
                position += 1
            if not closed:
                raise WarehouseLocationError(
                    f"malformed DuckLake conninfo: unterminated quote in the value of {key!r}"
                )
        else:
            while position < length and not conninfo[position].isspace():
                char = conninfo[position]
                if char == "\\" and position + 1 < length:
                    value.append(conninfo[position + 1])
                    position += 2
                    continue
                value.append(char)
                position += 1
        if key in pairs:
            raise WarehouseLocationError(f"malformed DuckLake conninfo: {key!r} given twice")
        pairs[key] = "".join(value)
    if "port" in pairs and not pairs["port"].isdigit():
        raise WarehouseLocationError("malformed DuckLake conninfo: port must be a number")
    return pairs


def format_conninfo(pairs: dict[str, str]) -> str:
    def value(text: str) -> str:
        if text and not re.search(r"[\s'\\]", text):
            return text
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

    return " ".join(f"{key}={value(text)}" for key, text in pairs.items())


def normalise_data_path(data_path: str | Path) -> str:
    text = str(data_path).strip()
    if is_remote_data_path(text):
        return text.rstrip("/") + "/"
    if "://" in text:
        raise WarehouseLocationError(f"unsupported data path URL {redact(text)!r}")
    return str(Path(text).expanduser().resolve()) + "/"


def is_remote_data_path(data_path: str) -> bool:
    """True when `data_path` is an object-storage URL (s3://, gcs://, az://, ...)."""
    return bool(_REMOTE_DATA_PATH.match(data_path))


__all__ = [
    "LAKE_PREFIX",
    "SECRET_KEYS",
    "WarehouseLocation",
    "WarehouseLocationError",
    "format_conninfo",
    "is_lake_uri",
    "is_remote_data_path",
    "normalise_data_path",
    "parse_conninfo",
    "parse_location",
    "redact",
]
