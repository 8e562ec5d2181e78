"""Documents on demand: new or changed documents are downloaded once, with size and sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from diligence.documents import download_documents
from diligence.warehouse import Warehouse
from sandbox import edits
from sandbox.server import SandboxServer
from tests.helpers import copy_warehouse, query, settings_for, sync


def test_documents_are_downloaded_once_and_again_when_changed(
    sandbox: SandboxServer, warehouse: Path, synced_small: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "files"
    copy_warehouse(synced_small, warehouse)  # the first sync of this world
    (current,) = query(warehouse, "select count(*) from raw.documents where _dlt_valid_to is null")[0]

    first = download_documents(Warehouse(warehouse), folder, settings_for(sandbox))
    assert (first.downloaded, first.unchanged, first.failed) == (current, 0, 0)
    rows = query(warehouse, "select path, size_bytes, sha256 from raw.document_files")
    assert len(rows) == current
    for path, size, digest in rows:
        data = Path(path).read_bytes()
        assert len(data) == size and hashlib.sha256(data).hexdigest() == digest

    again = download_documents(Warehouse(warehouse), folder, settings_for(sandbox))
    assert (again.downloaded, again.unchanged) == (0, current)
    downloads = httpx.get(f"{sandbox.base_url}/_sandbox/stats").json()["files"]

    ns = sandbox.world.namespaces[0]
    document_id = query(
        warehouse,
        "select document_id from raw.documents where namespace_company_id = ? and _dlt_valid_to is null limit 1",
        ns,
    )[0][0]
    edits.update_document(sandbox.world, document_id, set_fields={"expirationDate": "2031-01-01T00:00:00"})
    sync(sandbox, warehouse)
    changed = download_documents(Warehouse(warehouse), folder, settings_for(sandbox))
    assert changed.downloaded >= 1 and changed.unchanged == current - changed.downloaded
    assert httpx.get(f"{sandbox.base_url}/_sandbox/stats").json()["files"] != downloads


def test_a_symlinked_folder_in_the_download_folder_is_never_written_through(
    sandbox: SandboxServer, warehouse: Path, synced_small: Path, tmp_path: Path
) -> None:
    folder, outside = tmp_path / "files", tmp_path / "outside"
    outside.mkdir()
    copy_warehouse(synced_small, warehouse)  # the first sync of this world
    namespaces = [ns for (ns,) in query(
        warehouse, "select distinct namespace_company_id from raw.documents where _dlt_valid_to is null")]
    folder.mkdir()
    from diligence.documents import _safe

    (folder / _safe(namespaces[0], "ns")).symlink_to(outside, target_is_directory=True)
    summary = download_documents(Warehouse(warehouse), folder, settings_for(sandbox))
    assert summary.failed >= 1
    assert list(outside.iterdir()) == []


def test_a_warehouse_deleted_beside_its_pipeline_folder_starts_afresh(
    sandbox: SandboxServer, warehouse: Path, synced_small: Path, tmp_path: Path
) -> None:
    """A user deletes the warehouse file but not `.dlt-pipelines/` next to it: dlt's old
    state must not make it skip creating tables in the new file (downloads included)."""
    copy_warehouse(synced_small, warehouse)  # the first sync of this world, dlt's folder too
    assert download_documents(Warehouse(warehouse), tmp_path / "first", settings_for(sandbox)).failed == 0
    warehouse.unlink()
    warehouse.with_name(warehouse.name + ".wal").unlink(missing_ok=True)
    assert not sync(sandbox, warehouse).failed
    again = download_documents(Warehouse(warehouse), tmp_path / "again", settings_for(sandbox))
    (current,) = query(warehouse, "select count(*) from raw.documents where _dlt_valid_to is null")[0]
    assert (again.downloaded, again.failed) == (current, 0)
    assert query(warehouse, "select count(*) from raw.document_files")[0][0] == current


def test_a_looping_document_fails_alone_and_every_other_file_is_recorded(
    sandbox: SandboxServer, warehouse: Path, synced_small: Path, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    copy_warehouse(synced_small, warehouse)  # the first sync of this world
    (current,) = query(warehouse, "select count(*) from raw.documents where _dlt_valid_to is null")[0]
    ns, company, type_id, looping = query(
        warehouse, "select namespace_company_id, company_id, company_type_id, document_id "
        "from raw.documents where _dlt_valid_to is null order by all limit 1")[0]
    sandbox.world.looping_files.add(looping)  # its URL redirects to itself, for ever
    (latest,) = query(warehouse, "select arg_max(sync_id, synced_at) from raw.sync_runs "
                      "where namespace_company_id = ?", ns)[0]

    with caplog.at_level("WARNING"):
        summary = download_documents(Warehouse(warehouse), tmp_path / "files", settings_for(sandbox))

    assert (summary.downloaded, summary.failed) == (current - 1, 1)
    assert query(warehouse, "select count(*) from raw.document_files")[0][0] == current - 1
    (issue,) = query(warehouse, "select sync_id, namespace_company_id, endpoint, company_id, "
                     "company_type_id, message from raw.sync_issues where endpoint = 'document_file'")
    assert issue[:5] == (latest, ns, "document_file", company, type_id)
    assert looping in issue[5] and "redirects in a loop" in issue[5]
    assert "Unclosed" not in caplog.text
