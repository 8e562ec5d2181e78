from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from diligence.analytics.models import ModelsResult, build_models
from tests.helpers import made_once

from .rawdb import (
    AS_OF,
    SYNCED_AT,
    company,
    connection,
    create_raw,
    document,
    field,
    form,
    insert,
    options,
    questionnaire,
    service_key,
)

V1_AT = SYNCED_AT - timedelta(days=7)


def make_clean_raw(path: Path) -> Path:
    """A small, consistent raw layer: one namespace, its own company, a connection with
    details and one whose details were denied, three questionnaires (one with two
    versions), documents in every expiry state, and two syncs with issues."""
    ns = "ns-a"
    create_raw(path)
    insert(path, "companies", [company(ns, ns, "Alpha"), company(ns, "c1", "Acme", lei="LEI1")])
    insert(
        path,
        "connections",
        [
            connection(ns, "c1", "Acme", given=["t1", "t2"], received=["t1"]),
            connection(ns, "c2", "Bravo", has_detail=False),
        ],
    )

    def forms(size: str) -> list[dict]:
        return [
            form(
                "f1",
                "General",
                field("h1", "Label", "General"),
                field("name", "Input", "Legal name", {"value": "Acme AS"}),
                field(
                    "size",
                    "Dropdown",
                    "Size",
                    {"options": [{"id": "o1", "value": size}]},
                    options("Small", "Large"),
                ),
                field("certs", "Checkbox", "Certifications", None, options("ISO", "SOC2")),
            )
        ]

    insert(
        path,
        "questionnaires",
        [
            questionnaire(ns, "c1", "t1", forms("Small"), valid_from=V1_AT, valid_to=SYNCED_AT),
            questionnaire(ns, "c1", "t1", forms("Large"), valid_from=SYNCED_AT),
            questionnaire(ns, "c2", "t1", forms("Small")),
            questionnaire(ns, ns, "t2", [form("f9", "Empty", field("h9", "Label", "Nothing"))]),
        ],
    )
    insert(
        path,
        "documents",
        [
            document(ns, "c1", "t1", "d-expired", "2026-02-01T00:00:00"),
            document(ns, "c1", "t1", "d-expiring", "2026-03-10T00:00:00"),
            document(ns, "c1", "t1", "d-valid", "2027-01-01T00:00:00"),
            document(ns, "c1", "t1", "d-none", None),
        ],
    )
    insert(
        path,
        "service_keys",
        [
            service_key(ns, "company", "id", valid_from=V1_AT),
            service_key(ns, "company", "registeredAt", modelled=False),  # sent from the second sync on
        ],
    )
    insert(
        path,
        "sync_runs",
        [
            {
                "sync_id": "s1",
                "namespace_company_id": ns,
                "started_at": V1_AT,
                "finished_at": V1_AT,
                "status": "success",
                "requests": 9,
                "rows_loaded": 9,
                "issues": 1,
            },
            {
                "sync_id": "s2",
                "namespace_company_id": ns,
                "started_at": SYNCED_AT,
                "finished_at": SYNCED_AT,
                "status": "success",
                "requests": 9,
                "rows_loaded": 9,
                "issues": 1,
            },
        ],
    )
    insert(
        path,
        "sync_issues",
        [
            {
                "sync_id": "s1",
                "namespace_company_id": ns,
                "endpoint": "connection_detail",
                "company_id": "c2",
                "http_status": 403,
                "message": "Forbidden",
                "synced_at": V1_AT,
            },
            {
                "sync_id": "s2",
                "namespace_company_id": ns,
                "endpoint": "connection_detail",
                "company_id": "c2",
                "http_status": 403,
                "message": "Forbidden",
                "synced_at": SYNCED_AT,
            },
        ],
    )
    return path


@pytest.fixture(scope="session")
def clean_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ModelsResult]:
    """The warehouse of make_clean_raw, built as of AS_OF once for the whole run
    (read-only), and its build."""
    folder, built = made_once(tmp_path_factory, "clean",
                              lambda folder: build_models(make_clean_raw(folder / "warehouse.duckdb"), as_of=AS_OF))
    return folder / "warehouse.duckdb", built


@pytest.fixture(scope="session")
def empty_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ModelsResult]:
    """A warehouse without a raw layer (what `diligence models` before any sync makes),
    built as of AS_OF once for the whole run (read-only), and its build."""
    folder, built = made_once(tmp_path_factory, "empty",
                              lambda folder: build_models(folder / "warehouse.duckdb", as_of=AS_OF))
    return folder / "warehouse.duckdb", built


@pytest.fixture(scope="session")
def clean_template(clean_build: tuple[Path, ModelsResult]) -> Path:
    return clean_build[0]


@pytest.fixture
def clean_warehouse(clean_template: Path, tmp_path: Path) -> Path:
    """This test's own copy of a warehouse built from make_clean_raw as of AS_OF."""
    path = tmp_path / "warehouse.duckdb"
    shutil.copyfile(clean_template, path)
    return path
