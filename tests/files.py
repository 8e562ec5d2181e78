"""What a script reads from an export: a CSV's cells as text, a Parquet file's values."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq


def csv_columns(path: Path) -> list[str]:
    """The header of the CSV file `path`."""
    with path.open(newline="", encoding="utf-8") as file:
        return next(csv.reader(file))


def csv_rows(path: Path) -> list[dict[str, str]]:
    """The rows of the CSV file `path`, each cell as written (an empty one: '')."""
    with path.open(newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))


def parquet_columns(path: Path) -> list[str]:
    """The columns of the Parquet file `path`."""
    return list(pq.read_schema(path).names)


def parquet_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of the Parquet file `path`, lists as lists and NULL as None."""
    return list(pq.read_table(path).to_pylist())
