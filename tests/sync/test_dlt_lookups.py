"""dlt's configuration lookups made once per sync (`diligence.dlt_lookups`).

* a data writer's settings are resolved once per section within a sync, and read
  again by the next sync;
* every copy handed out carries the destination capabilities in context now;
* a secret in a provider that cannot hold secrets is still refused;
* outside a sync dlt is as it was, also after nested and failed syncs;
* a whole sync resolves each writer's settings once per section, not per file;
* the type hints dlt validates its schema dicts with are worked out once per class,
  and equal typing's;
* the YAML of column hints in the run's metrics is made once per value, equals
  PyYAML's, and data that is not plain is always dumped anew.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dlt
import pytest
import yaml
from dlt.common import validation
from dlt.common.configuration import configspec, inject, resolve, resolve_configuration
from dlt.common.configuration.container import Container
from dlt.common.configuration.exceptions import ValueNotSecretException
from dlt.common.configuration.inject import inject_section
from dlt.common.configuration.specs import BaseConfiguration, CredentialsConfiguration
from dlt.common.configuration.specs.base_configuration import is_secret_hint
from dlt.common.configuration.specs.config_section_context import ConfigSectionContext
from dlt.common.data_writers import DataWriter
from dlt.common.data_writers.buffered import BufferedDataWriter
from dlt.common.destination import DestinationCapabilitiesContext
from dlt.common.destination.configuration import ParquetFormatConfiguration
from dlt.common.exceptions import DictValidationException
from dlt.common.schema.typing import TColumnSchema
from dlt.common.typing import TSecretStrValue
from dlt.extract import extract

from diligence.dlt_lookups import dlt_lookups_made_once
from sandbox.server import SandboxServer
from tests.helpers import sync

BUFFER_SETTING = "NORMALIZE__DATA_WRITER__BUFFER_MAX_ITEMS"
WRITER_SPECS = (BufferedDataWriter.BufferedDataWriterConfiguration, ParquetFormatConfiguration)


def _writer(tmp_path: Path, caps: DestinationCapabilitiesContext | None = None) -> BufferedDataWriter[Any]:
    """A data writer made as dlt's normalize step makes one (its settings injected)."""
    spec = DataWriter.writer_spec_from_file_format("parquet", "arrow")
    caps = caps or DestinationCapabilitiesContext.generic_capabilities("parquet")
    with inject_section(ConfigSectionContext(pipeline_name="company_connections", sections=("normalize",))):
        return BufferedDataWriter(spec, str(tmp_path / "%s.parquet"), _caps=caps)


def test_a_writers_settings_are_resolved_once_per_sync_and_again_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BUFFER_SETTING, "123")
    with dlt_lookups_made_once():
        assert _writer(tmp_path).buffer_max_items == 123
        monkeypatch.setenv(BUFFER_SETTING, "456")
        assert _writer(tmp_path).buffer_max_items == 123  # kept for this sync
    assert _writer(tmp_path).buffer_max_items == 456
    with dlt_lookups_made_once():
        assert _writer(tmp_path).buffer_max_items == 456  # the next sync reads it again


def test_the_kept_settings_equal_dlts_own_and_are_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NORMALIZE__DATA_WRITER__ROW_GROUP_SIZE", "777")
    section = ConfigSectionContext(pipeline_name="company_connections", sections=("normalize",))
    with inject_section(section):
        own = [dict(resolve_configuration(spec())) for spec in WRITER_SPECS]
    with dlt_lookups_made_once(), inject_section(section):
        first = [inject.resolve_configuration(spec()) for spec in WRITER_SPECS]
        second = [inject.resolve_configuration(spec()) for spec in WRITER_SPECS]
    assert [dict(c) for c in first] == own == [dict(c) for c in second]
    assert own[1]["row_group_size"] == 777
    # what one writer changes in its settings is not seen by the next one
    second[1].row_group_size = 1
    with dlt_lookups_made_once(), inject_section(section):
        assert inject.resolve_configuration(ParquetFormatConfiguration()).row_group_size == 777


def test_explicit_values_and_sections_are_kept_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUFFER_SETTING, "123")
    monkeypatch.setenv("EXTRACT__DATA_WRITER__BUFFER_MAX_ITEMS", "321")
    spec = DataWriter.writer_spec_from_file_format("parquet", "arrow")
    caps = DestinationCapabilitiesContext.generic_capabilities("parquet")
    with dlt_lookups_made_once():
        assert _writer(tmp_path).buffer_max_items == 123
        with inject_section(ConfigSectionContext(pipeline_name="company_connections", sections=("extract",))):
            assert BufferedDataWriter(spec, str(tmp_path / "%s"), _caps=caps).buffer_max_items == 321
            limited = BufferedDataWriter(spec, str(tmp_path / "%s"), file_max_items=7, _caps=caps)
            assert (limited.file_max_items, limited.buffer_max_items) == (7, 7)
            assert BufferedDataWriter(spec, str(tmp_path / "%s"), _caps=caps).file_max_items is None


def test_every_writer_gets_the_capabilities_in_context_now(tmp_path: Path) -> None:
    # dlt takes a writer's capabilities from the container, not from the providers:
    # each pipeline step injects its own
    parquet = DestinationCapabilitiesContext.generic_capabilities("parquet")
    jsonl = DestinationCapabilitiesContext.generic_capabilities("jsonl")
    section = ConfigSectionContext(pipeline_name="company_connections", sections=("normalize",))
    with dlt_lookups_made_once():
        seen = []
        for caps in (parquet, jsonl, parquet):
            with Container().injectable_context(caps), inject_section(section):
                seen.append(inject.resolve_configuration(BufferedDataWriter.BufferedDataWriterConfiguration())._caps)
        assert seen[0] is parquet and seen[1] is jsonl and seen[2] is parquet
        # and an explicit one wins, as in dlt
        assert _writer(tmp_path, caps=jsonl)._caps is jsonl


@configspec
class _WithSecret(BaseConfiguration):
    password: TSecretStrValue = None


@configspec
class _WithCredentials(BaseConfiguration):
    credentials: CredentialsConfiguration | None = None


def test_a_secret_in_config_toml_is_still_refused() -> None:
    # config.toml cannot hold secrets: dlt refuses one found there, and still does
    # while the secret answers are kept
    dlt.config["sources.dlt_lookups_test.password"] = "not-a-place-for-it"
    for made_once in (False, True, False):
        with dlt_lookups_made_once() if made_once else contextlib.nullcontext():
            with pytest.raises(ValueNotSecretException):
                resolve_configuration(_WithSecret(), sections=("sources", "dlt_lookups_test"))


def test_the_kept_secret_answers_are_dlts() -> None:
    hints = [str, int, TSecretStrValue, CredentialsConfiguration, CredentialsConfiguration | None,
             _WithCredentials.get_resolvable_fields()["credentials"], list[str], dict[str, Any]]
    with dlt_lookups_made_once():
        kept = [resolve.is_secret_hint(hint) for hint in hints * 2]
    assert kept == [is_secret_hint(hint) for hint in hints * 2]
    assert kept[:3] == [False, False, True]


def test_the_type_hints_of_dlts_schema_dicts_are_worked_out_once_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    own = validation.get_type_hints

    def counting(obj: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(obj)
        return own(obj, *args, **kwargs)

    monkeypatch.setattr(validation, "get_type_hints", counting)
    column = {"name": "id", "data_type": "text", "nullable": False}
    module = sys.modules[TColumnSchema.__module__].__dict__  # as dlt's validation passes it
    with dlt_lookups_made_once():
        for _ in range(3):
            validation.validate_dict(TColumnSchema, column, ".")
        kept = validation.get_type_hints(TColumnSchema, globalns=module)
        kept["name"] = None  # a caller's change does not reach the next caller
        assert validation.get_type_hints(TColumnSchema, globalns=module) == own(TColumnSchema, globalns=module)
        with pytest.raises(DictValidationException):  # validation still validates
            validation.validate_dict(TColumnSchema, {**column, "nullable": "no"}, ".")
    assert calls.count(TColumnSchema) == 1
    assert validation.get_type_hints is counting  # given back


def test_the_yaml_of_column_hints_is_made_once_per_value() -> None:
    made: list[Any] = []
    own = extract.yaml

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(own, name)

        def dump(self, data: Any, stream: Any = None, **options: Any) -> Any:
            made.append(data)
            return own.dump(data, stream, **options)

    options = {"allow_unicode": True, "default_flow_style": False, "sort_keys": False}
    hints = {"id": {"name": "id", "data_type": "text", "nullable": False, "precision": 3}}
    extract.yaml = Counting()  # type: ignore[assignment]
    try:
        with dlt_lookups_made_once():
            first = extract.yaml.dump(hints, **options)
            again = extract.yaml.dump({"id": dict(hints["id"])}, **options)  # equal, not the same
            other = extract.yaml.dump({"id": {**hints["id"], "precision": 3.0}}, **options)
            tuples = [extract.yaml.dump({"id": ("a", "b")}, **options) for _ in range(2)]
            assert extract.yaml.safe_load is yaml.safe_load  # the rest of the module as it is
        assert first == again == yaml.dump(hints, **options)
        assert other == yaml.dump({"id": {**hints["id"], "precision": 3.0}}, **options) != first
        assert tuples == [yaml.dump({"id": ("a", "b")}, **options)] * 2
        assert len(made) == 4  # hints once, the float once, the tuples (not plain) each time
    finally:
        extract.yaml = own  # type: ignore[assignment]


def test_outside_a_sync_dlt_is_as_it_was() -> None:
    from dlt.common.configuration.providers import environ

    own = (inject.resolve_configuration, resolve.is_secret_hint, environ.is_secret_hint)
    pure = (validation.get_type_hints, extract.yaml)
    with dlt_lookups_made_once():
        with dlt_lookups_made_once():  # a sync inside another (a step that syncs)
            pass
        assert inject.resolve_configuration is not own[0]  # still the outer sync's
    with pytest.raises(RuntimeError), dlt_lookups_made_once():
        raise RuntimeError("a sync that failed")
    assert (inject.resolve_configuration, resolve.is_secret_hint, environ.is_secret_hint) == own
    assert (validation.get_type_hints, extract.yaml) == pure


def test_a_sync_resolves_each_writers_settings_once_per_section(
    sandbox: SandboxServer, warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = inject.resolve_configuration
    resolved: list[str] = []

    def counting(config: Any, **kwargs: Any) -> Any:
        if isinstance(config, WRITER_SPECS):
            resolved.append(type(config).__name__)
        return original(config, **kwargs)

    monkeypatch.setattr(inject, "resolve_configuration", counting)
    result = sync(sandbox, warehouse)
    assert not result.failed and len(result.namespaces) >= 2
    # extract and normalize each resolve the two writer specs once, for the whole sync
    # (without: once per file, 12 or more per namespace)
    assert sorted(resolved) == sorted(["BufferedDataWriterConfiguration", "ParquetFormatConfiguration"] * 2)
    assert inject.resolve_configuration is counting  # given back after the sync


@pytest.fixture(autouse=True)
def _no_sync_left_open() -> Iterator[None]:
    yield
    import diligence.dlt_lookups as lookups

    assert lookups._depth == 0 and not lookups._replaced
