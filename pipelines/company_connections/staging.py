"""Per-namespace staging: rows go to Arrow record batches, then to Parquet files.

While a namespace is fetched, each of its tables converts its rows to Arrow record
batches of CONVERT_ROWS rows as they arrive, and holds at most `batch_size` rows in
memory; once that many are held they are appended to the table's Parquet file in the
namespace's own folder, as one row group. Memory held per namespace is therefore
bounded by the batch size, not by the size of the namespace::

    <staging dir>/<sync id>/<namespace>/companies.parquet
                                        connections.parquet
                                        ...

:meth:`NamespaceStage.close` finishes the files and hands over the rows still held
(fewer than `batch_size` per table: a small namespace never touches the disk); the
namespace is then complete and can be loaded. Converting as rows arrive, in small
batches, costs a tenth of converting a whole table at once (pyarrow's conversion of
long lists of strings grows faster than their length), and it leaves little to do
when the namespace completes: for the last namespace of a sync, that is on the wall
clock. :meth:`NamespaceStage.discard` deletes the folder (a failed namespace leaves
nothing behind). A process killed mid-way leaves a folder that no later run reads:
every run stages into a folder of its own sync id and deletes older ones.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .schema import NAMESPACE_TABLES, arrow_schema

__all__ = ["NamespaceStage", "StagedTable", "read_batches", "empty_table"]


#: Rows converted to one Arrow record batch at a time, as they arrive.
CONVERT_ROWS = 50


@dataclass
class StagedTable:
    """One table of one namespace: its Parquet file (None if nothing was written to
    one), the rows not written to it (held as Arrow record batches), the row count, and
    the size of the rows in memory (Arrow's buffers, before compression)."""

    name: str
    path: Path | None = None
    rows: int = 0
    bytes: int = 0
    batches: tuple[pa.RecordBatch, ...] = ()


class _TableWriter:
    def __init__(self, name: str, folder: Path, batch_size: int) -> None:
        self.name = name
        self.schema = arrow_schema(name)
        self.path = folder / f"{name}.parquet"
        self.batch_size = batch_size
        self.buffer: list[dict[str, Any]] = []
        #: converted rows not yet in the file (fewer than `batch_size`)
        self.batches: list[pa.RecordBatch] = []
        self.held = 0
        self.rows = 0
        self.bytes = 0
        self.writer: pq.ParquetWriter | None = None

    def append(self, row: dict[str, Any]) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= CONVERT_ROWS or self.held + len(self.buffer) >= self.batch_size:
            self.convert()

    def convert(self) -> None:
        if not self.buffer:
            return
        batch = pa.RecordBatch.from_pylist(self.buffer, schema=self.schema)
        self.buffer = []
        self.batches.append(batch)
        self.held += batch.num_rows
        self.rows += batch.num_rows
        self.bytes += batch.nbytes
        if self.held >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        """Append the rows held to the file, as one row group."""
        if not self.batches:
            return
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, self.schema, compression="snappy")
        self.writer.write_table(pa.Table.from_batches(self.batches, schema=self.schema))
        self.batches = []
        self.held = 0

    def close(self) -> StagedTable:
        self.convert()
        path = None
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            path = self.path
        staged = StagedTable(self.name, path, self.rows, self.bytes, tuple(self.batches))
        self.batches = []
        self.held = 0
        return staged

    def abort(self) -> None:
        self.buffer = []
        self.batches = []
        self.held = 0
        if self.writer is not None:
            try:
                self.writer.close()
            except Exception:  # noqa: BLE001 - the file is deleted anyway
                pass
            self.writer = None


def namespace_folder(root: Path, namespace: str) -> Path:
    """A folder name for `namespace` that is safe on any file system."""
    digest = hashlib.blake2b(namespace.encode(), digest_size=6).hexdigest()
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in namespace)[:40]
    return root / f"{safe}-{digest}"


@dataclass
class NamespaceStage:
    """The staged rows of one namespace while it is fetched."""

    namespace_company_id: str
    folder: Path
    batch_size: int
    _writers: dict[str, _TableWriter] = field(default_factory=dict)

    @classmethod
    def create(cls, root: Path, namespace: str, batch_size: int) -> NamespaceStage:
        folder = namespace_folder(root, namespace)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(mode=0o700, parents=True)
        stage = cls(namespace, folder, max(1, batch_size))
        stage._writers = {name: _TableWriter(name, folder, stage.batch_size) for name in NAMESPACE_TABLES}
        return stage

    def append(self, table: str, row: dict[str, Any]) -> None:
        self._writers[table].append(row)

    def close(self) -> dict[str, StagedTable]:
        """Finish every file and hand over the rows still held: the namespace's
        tables, ready to load."""
        return {name: writer.close() for name, writer in self._writers.items()}

    def discard(self) -> None:
        """Drop everything staged for the namespace."""
        for writer in self._writers.values():
            writer.abort()
        shutil.rmtree(self.folder, ignore_errors=True)


def empty_table(name: str) -> pa.Table:
    """A zero-row table of raw table `name` (it still makes dlt run the table's merge)."""
    return arrow_schema(name).empty_table()


def read_batches(table: StagedTable, batch_size: int = 2_000) -> Iterator[pa.Table]:
    """The staged rows of `table` as Arrow tables of at most `batch_size` rows: those
    in its file, then those held in memory.

    A table without rows yields one empty table, so that its merge still runs and the
    namespace's rows that are gone upstream are deleted or retired.
    """
    if not table.rows:
        yield empty_table(table.name)
        return
    if table.path is not None:
        parquet = pq.ParquetFile(table.path)
        try:
            for batch in parquet.iter_batches(batch_size=batch_size):
                yield pa.Table.from_batches([batch])
        finally:
            parquet.close()
    if table.batches:
        held = pa.Table.from_batches(table.batches)
        for offset in range(0, held.num_rows, batch_size):
            yield held.slice(offset, batch_size)
