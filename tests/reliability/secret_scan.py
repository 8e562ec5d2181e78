"""What the secret-scan tests look for, and where: every form a secret can take at rest.

A secret is looked for as itself and in the forms code tends to write it in: the
password, ``base64(email:password)`` (a Basic header's value), the password in base64,
every token the sandbox issued (and ``Bearer <token>``, and the token in base64), and
the header every JWT starts with, which catches a token the list missed.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from pathlib import Path

#: Every JWT the sandbox issues starts with this header (HS256, typ JWT).
JWT_PREFIX = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=")


def _b64_forms(value: bytes) -> list[bytes]:
    return [base64.b64encode(value), base64.urlsafe_b64encode(value).rstrip(b"=")]


def secret_forms(email: str, password: str, tokens: Iterable[str] = ()) -> dict[str, bytes]:
    """name -> bytes that must appear in no file and no output."""
    forms: dict[str, bytes] = {"password": password.encode()}
    for i, form in enumerate(_b64_forms(password.encode())):
        forms[f"password in base64 ({i})"] = form
    basic = f"{email}:{password}".encode()
    for i, form in enumerate(_b64_forms(basic)):
        forms[f"Basic credentials ({i})"] = form
    forms["any JWT"] = JWT_PREFIX
    for n, token in enumerate(tokens):
        forms[f"token {n}"] = token.encode()
        forms[f"token {n} as Bearer header"] = f"Bearer {token}".encode()
        for i, form in enumerate(_b64_forms(token.encode())):
            forms[f"token {n} in base64 ({i})"] = form
    return forms


def leaks_in(blob: bytes, forms: dict[str, bytes]) -> list[str]:
    return [name for name, form in forms.items() if form in blob]


def decoded_text(path: Path) -> bytes:
    """Every value of a DuckDB or Parquet file as text: their strings may be compressed
    (DuckDB's FSST and dictionaries, Parquet's zstd), which a byte scan cannot see."""
    import duckdb

    con = duckdb.connect()
    try:
        if path.suffix == ".parquet":
            relations = [f"read_parquet('{path}')"]
        else:
            con.execute(f"attach '{path}' as scanned (read_only)")
            relations = [
                f'scanned."{schema}"."{table}"'
                for schema, table in con.execute(
                    "select table_schema, table_name from information_schema.tables "
                    "where table_catalog = 'scanned'"
                ).fetchall()
            ]
        chunks = []
        for relation in relations:
            rows = con.execute(f"select t::varchar from {relation} as t").fetchall()
            chunks.append("\n".join(row[0] or "" for row in rows))
        return "\n".join(chunks).encode()
    finally:
        con.close()


def scan(roots: Iterable[Path], forms: dict[str, bytes]) -> tuple[int, dict[str, list[str]]]:
    """(files scanned, {file: secret forms found}) over every file under `roots`; DuckDB
    and Parquet files are also read value by value (:func:`decoded_text`)."""
    scanned = 0
    found: dict[str, list[str]] = {}
    for root in roots:
        paths = [Path(root)] if Path(root).is_file() else sorted(Path(root).rglob("*"))
        for path in paths:
            if path.is_file() and not path.is_symlink():
                scanned += 1
                blob = path.read_bytes()
                if path.suffix in (".duckdb", ".parquet") and not path.name.startswith("."):
                    blob += decoded_text(path)
                names = leaks_in(blob, forms)
                if names:
                    found[str(path)] = names
    return scanned, found
