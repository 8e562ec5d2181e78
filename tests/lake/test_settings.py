"""Where the warehouse settings come from: the argument, else DILIGENCE_WAREHOUSE /
DILIGENCE_DATA_PATH, else config [warehouse] location / data_path, else the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from diligence.errors import WarehouseLocationError
from diligence.warehouse import DEFAULT_WAREHOUSE, open_warehouse, warehouse_settings

LAKE = "ducklake:postgres:dbname=lake host=127.0.0.1 user=loader"


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DILIGENCE_WAREHOUSE", "DILIGENCE_DATA_PATH", "WAREHOUSE__LOCATION",
                 "WAREHOUSE__DATA_PATH"):
        monkeypatch.delenv(name, raising=False)


def test_default_is_the_duckdb_file() -> None:
    assert warehouse_settings() == (DEFAULT_WAREHOUSE, None)
    owner = open_warehouse()
    assert not owner.is_lake and owner.path == DEFAULT_WAREHOUSE


def test_env_then_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WAREHOUSE__LOCATION", LAKE)  # dlt config [warehouse] location
    monkeypatch.setenv("WAREHOUSE__DATA_PATH", str(tmp_path / "config"))
    assert warehouse_settings() == (LAKE, str(tmp_path / "config"))
    monkeypatch.setenv("DILIGENCE_DATA_PATH", str(tmp_path / "env"))
    assert warehouse_settings() == (LAKE, str(tmp_path / "env"))
    monkeypatch.setenv("DILIGENCE_WAREHOUSE", str(tmp_path / "w.duckdb"))
    # a file takes no configured data path
    assert warehouse_settings() == (str(tmp_path / "w.duckdb"), None)
    # an argument wins
    owner = open_warehouse(LAKE, str(tmp_path / "arg"))
    assert owner.is_lake and owner.location.data_path == str((tmp_path / "arg").resolve()) + "/"
    assert "password" not in owner.display()


def test_a_malformed_location_is_one_line() -> None:
    with pytest.raises(WarehouseLocationError) as raised:
        open_warehouse("ducklake:postgres:host=x password=hunter2", "/tmp/x")
    assert "\n" not in str(raised.value) and "hunter2" not in str(raised.value)
