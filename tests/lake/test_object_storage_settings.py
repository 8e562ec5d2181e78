"""Object storage settings: where the credentials and endpoint come from, the DuckDB
secret and dbt profile made from them (path-style off AWS, TLS off only for http://, the
secret key never in a repr, a profile or a message), and the checks that stop a bad
setting in one line before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from diligence.analytics import dbt
from diligence.errors import WarehouseLocationError
from diligence.warehouse import Warehouse
from diligence.warehouse.location import parse_location
from diligence.warehouse.storage import ObjectStorage, S3Url, object_storage, probe_writable

from .objectstore import ObjectStore

LAKE = "ducklake:postgres:dbname=lake host=127.0.0.1 user=loader"
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_standard_variables_win_over_the_warehouse_settings(clean_environment: pytest.MonkeyPatch) -> None:
    clean_environment.setenv("WAREHOUSE__S3_REGION", "eu-west-3")
    clean_environment.setenv("WAREHOUSE__S3_ENDPOINT_URL", "http://127.0.0.1:9000")
    clean_environment.setenv("WAREHOUSE__S3_ACCESS_KEY_ID", "configured-key")
    clean_environment.setenv("WAREHOUSE__S3_SECRET_ACCESS_KEY", "configured-secret")
    configured = object_storage()
    assert (configured.key_id, configured.secret, configured.region, configured.endpoint_url) == (
        "configured-key", "configured-secret", "eu-west-3", "http://127.0.0.1:9000")
    clean_environment.setenv("AWS_ACCESS_KEY_ID", "env-key")
    clean_environment.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    clean_environment.setenv("AWS_DEFAULT_REGION", "us-west-2")
    from_env = object_storage()
    assert (from_env.key_id, from_env.secret, from_env.region) == ("env-key", "env-secret", "us-west-2")
    assert from_env.endpoint_url == "http://127.0.0.1:9000"  # not in the environment: configured


def test_a_server_that_is_not_aws_is_addressed_path_style_and_tls_is_off_only_for_http() -> None:
    local = ObjectStorage("key", "very-secret", region="eu-central-1", endpoint_url="http://127.0.0.1:9000")
    sql = local.duckdb_secret_sql()
    assert "temporary secret" in sql and "url_style 'path'" in sql and "use_ssl false" in sql
    assert "endpoint '127.0.0.1:9000'" in sql
    tls = ObjectStorage("key", "very-secret", endpoint_url="https://minio.internal:9000")
    assert "url_style 'path'" in tls.duckdb_secret_sql() and "use_ssl true" in tls.duckdb_secret_sql()
    aws = ObjectStorage("key", "very-secret", region="eu-central-1")
    assert "url_style" not in aws.duckdb_secret_sql() and "use_ssl true" in aws.duckdb_secret_sql()
    assert "very-secret" not in repr(local) and "very-secret" not in local.analyst_secret_sql()


@pytest.mark.parametrize(("storage", "message"), [
    (dict(key_id="key"), "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"),
    (dict(secret="very-secret"), "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"),
    (dict(endpoint_url="127.0.0.1:9000"), "must be an http:// or https:// URL"),
])
def test_half_given_credentials_and_a_bare_endpoint_stop_in_one_line(storage: dict, message: str) -> None:
    with pytest.raises(WarehouseLocationError, match=message) as raised:
        ObjectStorage(**storage)
    assert "very-secret" not in str(raised.value)


def test_the_evidence_store_may_not_share_a_prefix_with_the_lake_data(tmp_path: Path) -> None:
    with pytest.raises(WarehouseLocationError, match="must not share a prefix"):
        Warehouse(LAKE, "s3://bucket/lake/", evidence="s3://bucket/lake/evidence/")
    with pytest.raises(WarehouseLocationError, match="must not share a prefix"):
        Warehouse(LAKE, "s3://bucket/all/lake/", evidence="s3://bucket/all/")
    apart = Warehouse(LAKE, "s3://bucket/lake/", evidence="s3://bucket/evidence")
    assert apart.evidence_bucket == "s3://bucket/evidence/"
    assert apart.evidence_root is not None and "://" not in str(apart.evidence_root)
    assert S3Url.parse("s3://bucket").prefix == ""


def test_the_dbt_profile_names_the_keys_and_holds_neither(clean_environment: pytest.MonkeyPatch) -> None:
    clean_environment.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    clean_environment.setenv("AWS_SECRET_ACCESS_KEY", "very-secret")
    clean_environment.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    location = parse_location(LAKE, "s3://bucket/lake/")
    text = yaml.safe_dump(dbt.profile(location))
    assert "very-secret" not in text and "AKIAEXAMPLE" not in text
    assert "env_var(" in text and "DBT_ENV_SECRET_S3_SECRET" in text and "url_style: path" in text
    assert "DBT_ENV_SECRET_S3_SECRET" in dbt.profile_yaml(location)
    with dbt._secrets_in_environment(location):
        import os

        assert os.environ["DBT_ENV_SECRET_S3_SECRET"] == "very-secret"
    assert "DBT_ENV_SECRET_S3_SECRET" not in os.environ


def test_a_bucket_that_cannot_be_written_stops_in_one_line(bucket: ObjectStore) -> None:
    good = ObjectStorage(bucket.key_id, bucket.secret, region=bucket.region, endpoint_url=bucket.endpoint)
    probe_writable(bucket.url("probe"), good, "the data path")
    assert not bucket.keys("probe/")  # the probe is gone
    with pytest.raises(WarehouseLocationError, match=r"s3://no-such-bucket/lake/ cannot be written: NoSuchBucket"):
        probe_writable("s3://no-such-bucket/lake/", good, "the data path")
    bucket.relay.stop()
    try:
        with pytest.raises(WarehouseLocationError, match="cannot be reached") as raised:
            probe_writable(bucket.url("probe"), good, "the data path")
        assert bucket.secret not in str(raised.value)
    finally:
        bucket.relay.start()
