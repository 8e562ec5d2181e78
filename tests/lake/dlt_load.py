"""One namespace's dlt run into a lake, as a worker process would do it: the pipeline
comes from `diligence.warehouse.lake_pipeline.lake_pipeline_parts`. Importable by spawned processes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

ROWS_PER_NAMESPACE = 500


def company_rows(namespace: str, changed: int = 0) -> list[dict[str, str]]:
    """The namespace's companies; the first `changed` ones with a new name."""
    rows = []
    for n in range(ROWS_PER_NAMESPACE):
        name = f"Company {n}" + (" (renamed)" if n < changed else "")
        # the scd2 version hash must be unique lake-wide: it includes the namespace
        digest = hashlib.sha256(f"{namespace}|{n}|{name}".encode()).hexdigest()
        rows.append(
            {
                "namespace_company_id": namespace,
                "company_id": f"co-{n}",
                "name": name,
                "content_hash": digest,
            }
        )
    return rows


def load_namespace(
    uri: str, data_path: str, namespace: str, pipelines_root: str, changed: int = 0,
    through_connection: bool = False,
) -> int:
    """Load the namespace's companies (scd2, retiring only its own rows); returns the
    number of rows dlt reports loaded. With `through_connection`, dlt loads through a
    connection of this process with the lake attached (as a sync step does), else
    through dlt's ducklake destination."""
    from diligence.warehouse import lake
    from diligence.warehouse.location import parse_location

    location = parse_location(uri, data_path)
    if not through_connection:
        return _load(location, namespace, pipelines_root, changed, None)
    con = lake.connect(location)
    try:
        return _load(location, namespace, pipelines_root, changed, con)
    finally:
        con.close()


def _load(location: Any, namespace: str, pipelines_root: str, changed: int, con: Any) -> int:
    import dlt

    from diligence.warehouse import lake, lake_pipeline
    from diligence.warehouse.sql import transaction

    parts = lake_pipeline.lake_pipeline_parts(
        location, namespace, pipelines_root=Path(pipelines_root), connection=con
    )

    @dlt.resource(
        name="companies",
        write_disposition={
            "disposition": "merge",
            "strategy": "scd2",
            "row_version_column_name": "content_hash",
        },
        merge_key="namespace_company_id",
    )
    def companies():
        yield company_rows(namespace, changed)

    pipeline = dlt.pipeline(
        pipeline_name=parts.pipeline_name,
        pipelines_dir=str(parts.pipelines_dir),
        destination=parts.destination,
        dataset_name=parts.dataset_name,
        progress=None,
    )
    def whole() -> Any:  # as diligence.sync loads a namespace
        if pipeline.has_pending_data:
            pipeline.drop_pending_packages()
        pipeline.extract(companies())
        pipeline.normalize()
        if con is None:
            return pipeline.load()
        with transaction(con):
            return pipeline.load(workers=1)

    info = lake.load_retrying(whole)
    info.raise_on_failed_jobs()
    return sum(
        len(package.jobs["completed_jobs"]) for package in info.load_packages
    )
