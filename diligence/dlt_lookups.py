"""dlt's configuration lookups that cannot change within a sync, made once per sync.

A quarter of a namespace's dlt run (`medium` profile, sampled with py-spy over 40
runs) is dlt resolving configuration through its providers (env vars,
``.dlt/secrets.toml``, ``.dlt/config.toml``), and two kinds of lookup repeat with the
same answer every time:

* **Data writers.** Every file dlt writes (extract and normalize write one per table)
  opens a buffered writer and a Parquet writer, and each resolves its settings
  (``BufferedDataWriterConfiguration``, ``ParquetFormatConfiguration``) again: 16.5 %
  of the run.
* **Secret hints.** For every key looked up in a provider, dlt works out from the
  field's type hint whether the field is a secret (``is_secret_hint``), and with a
  ``.dlt/config.toml`` present it does so for every section path tried. That typing
  introspection is most of the lookup: resolving a writer's two settings objects takes
  9.0 ms with the project's ``config.toml`` and 3.4 ms without one.

Within :func:`dlt_lookups_made_once` (the loads of one sync), the first resolution of
a writer's settings in a given section context, with given explicit values and the same
destination capabilities, is kept and every later one gets a copy; a type hint's secret
answer (a pure function of the hint) is kept too. Every other configuration dlt
resolves is untouched, and once the last sync in the process ends dlt is as it was, so
the next sync reads changed settings again. A `medium` namespace's dlt run goes from
0.71-0.73 s to 0.52-0.56 s (medians of 25 runs each, three alternations), and the last
namespace's dlt run is what a sync adds after its last response.

Two more pure functions are answered once per argument while a sync loads:

* **Type hints of dlt's schema dicts.** dlt validates its schema's and normalizers'
  dicts against their ``TypedDict`` specs, and works out each spec's type hints again
  every time (``get_type_hints``, 184 calls per `medium` namespace; dlt's own code marks
  it as slow). A class's hints do not change while the process runs.
* **Column hints as YAML.** After extracting, dlt writes each resource's column hints
  as YAML into the run's metrics (eight ``yaml.dump`` calls, about 2 ms each); the same
  hints give the same text, so the text of plain data (dicts, lists, strings, numbers)
  is kept by its ``repr``.

This replaces module attributes of dlt for the duration (``resolve_configuration`` as
dlt's injection calls it, ``is_secret_hint`` as its resolver and env provider call it,
``get_type_hints`` as its dict validation calls it, ``yaml`` as its extract step calls
it); those a dlt version no longer has are left alone, and dlt runs as it is.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import threading
from collections.abc import Callable, Hashable, Iterator
from types import ModuleType
from typing import Any

log = logging.getLogger("diligence.dlt_lookups")

__all__ = ["dlt_lookups_made_once"]

_guard = threading.Lock()
_depth = 0
#: (module, attribute, dlt's own function) of what is replaced while a sync loads
_replaced: list[tuple[ModuleType, str, Callable[..., Any]]] = []
_writer_settings: dict[Hashable, Any] = {}


@contextlib.contextmanager
def dlt_lookups_made_once() -> Iterator[None]:
    """Within: data writers' settings and secret hints are resolved once (see module).

    Re-entrant and safe across threads: the first entry installs, the last exit
    restores dlt's own functions and forgets what was kept.
    """
    global _depth
    with _guard:
        if _depth == 0:
            _install()
        _depth += 1
    try:
        yield
    finally:
        with _guard:
            _depth -= 1
            if _depth == 0:
                _restore()


def _install() -> None:
    try:
        from dlt.common.configuration import inject, resolve
        from dlt.common.configuration.providers import environ
        from dlt.common.configuration.specs.base_configuration import is_secret_hint

        specs = _writer_specs()
    except ImportError:  # a dlt that is laid out differently: leave it alone
        log.debug("dlt's configuration modules not found; lookups are not kept")
        return
    if not all(hasattr(m, a) for m, a in ((inject, "resolve_configuration"), (resolve, "is_secret_hint"))):
        log.debug("dlt's resolver has changed; lookups are not kept")
        return
    secret = _kept_secret_hint(is_secret_hint)
    targets = [(inject, "resolve_configuration", _kept_writer_settings(inject.resolve_configuration, specs))]
    targets += [(m, "is_secret_hint", secret) for m in (resolve, environ) if hasattr(m, "is_secret_hint")]
    targets += _kept_pure_functions()
    for module, name, replacement in targets:
        _replaced.append((module, name, getattr(module, name)))
        setattr(module, name, replacement)


def _restore() -> None:
    while _replaced:
        module, name, original = _replaced.pop()
        setattr(module, name, original)
    _writer_settings.clear()


def _kept_pure_functions() -> list[tuple[ModuleType, str, Any]]:
    """dlt's dict validation's ``get_type_hints`` and its extract step's ``yaml``, each
    answering once per argument (left out when dlt no longer uses them there)."""
    targets: list[tuple[ModuleType, str, Any]] = []
    try:
        from dlt.common import validation
    except ImportError:
        validation = None  # type: ignore[assignment]
    if validation is not None and callable(getattr(validation, "get_type_hints", None)):
        targets.append((validation, "get_type_hints", _kept_type_hints(validation.get_type_hints)))
    try:
        from dlt.extract import extract
    except ImportError:
        extract = None  # type: ignore[assignment]
    if extract is not None and callable(getattr(getattr(extract, "yaml", None), "dump", None)):
        targets.append((extract, "yaml", _KeptYaml(extract.yaml)))
    return targets


def _kept_type_hints(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """`original` (``typing.get_type_hints``) answering once per class: a class's
    hints, resolved in its module's namespace, do not change while it loads."""
    kept: dict[Hashable, dict[str, Any]] = {}

    def get_type_hints(obj: Any, globalns: Any = None, localns: Any = None, include_extras: bool = False) -> dict[str, Any]:
        if not isinstance(obj, type) or localns is not None:
            return original(obj, globalns=globalns, localns=localns, include_extras=include_extras)
        key = (obj, id(globalns), include_extras)
        hints = kept.get(key)
        if hints is None:
            hints = kept[key] = original(obj, globalns=globalns, include_extras=include_extras)
        return dict(hints)  # the caller may change what it gets

    return get_type_hints


def _is_plain(value: Any, depth: int = 0) -> bool:
    """True for data whose ``repr`` tells it apart from any other: dicts, lists,
    strings, numbers, booleans and None, nested."""
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return True
    if depth > 16:
        return False
    if kind is dict:
        return all(type(k) is str and _is_plain(v, depth + 1) for k, v in value.items())
    if kind is list:
        return all(_is_plain(v, depth + 1) for v in value)
    return False


class _KeptYaml:
    """The ``yaml`` module as dlt's extract step sees it, with ``dump`` of plain data
    answered once per value and options (the text of equal plain data is equal)."""

    _LIMIT = 512

    def __init__(self, module: Any) -> None:
        self._module = module
        self._kept: dict[tuple[str, str], Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def dump(self, data: Any, stream: Any = None, **options: Any) -> Any:
        if stream is not None or not _is_plain(data):
            return self._module.dump(data, stream, **options)
        key = (repr(data), repr(sorted(options.items())))
        text = self._kept.get(key)
        if text is None:
            text = self._module.dump(data, **options)
            if len(self._kept) < self._LIMIT:
                self._kept[key] = text
        return text


def _kept_secret_hint(original: Callable[[Any], bool]) -> Callable[[Any], bool]:
    kept = functools.lru_cache(maxsize=1024)(original)

    def is_secret_hint(hint: Any) -> bool:
        try:
            return kept(hint)
        except TypeError:  # a hint that cannot be a key (unhashable metadata)
            return original(hint)

    return is_secret_hint


def _writer_specs() -> tuple[type, ...]:
    from dlt.common.data_writers.buffered import BufferedDataWriter
    from dlt.common.destination.configuration import ParquetFormatConfiguration

    return (BufferedDataWriter.BufferedDataWriterConfiguration, ParquetFormatConfiguration)


def _kept_writer_settings(original: Callable[..., Any], specs: tuple[type, ...]) -> Callable[..., Any]:
    plans = {spec: _Plan(spec) for spec in specs}

    def resolve_configuration(config: Any, *, sections: tuple[str, ...] = (), explicit_value: Any = None,
                              accept_partial: bool = False) -> Any:
        plan = plans.get(type(config))
        key = plan.key(config, sections, explicit_value, accept_partial) if plan is not None else None
        if key is None:
            return original(config, sections=sections, explicit_value=explicit_value, accept_partial=accept_partial)
        kept = _writer_settings.get(key)
        if kept is None:
            kept = _writer_settings[key] = original(
                config, sections=sections, explicit_value=explicit_value, accept_partial=accept_partial
            )
            return copy.copy(kept)
        # a copy: dlt may change what it gets (a Parquet writer merges its format into it)
        return plan.with_contexts(copy.copy(kept), explicit_value)

    return resolve_configuration


class _Plan:
    """What one writer spec's resolved settings depend on."""

    def __init__(self, spec: type) -> None:
        from dlt.common.configuration.specs import ContainerInjectableContext
        from dlt.common.configuration.specs.base_configuration import extract_inner_hint

        self.spec = spec
        self.defaults = dict(spec())
        self.fields: list[str] = []
        #: fields dlt takes from the container, not from providers (the destination's
        #: capabilities): the current ones are set on every copy handed out
        self.contexts: list[tuple[str, type]] = []
        for name, hint in spec.get_resolvable_fields().items():
            inner = extract_inner_hint(hint)
            if isinstance(inner, type) and issubclass(inner, ContainerInjectableContext):
                self.contexts.append((name, inner))
            else:
                self.fields.append(name)

    def key(self, config: Any, sections: tuple[str, ...], explicit_value: Any,
            accept_partial: bool) -> Hashable | None:
        """The section context and the explicit values given for the spec's fields;
        None when the settings cannot be kept (an initial config other than the
        defaults, a value that cannot be a key)."""
        from dlt.common.configuration.container import Container
        from dlt.common.configuration.specs.config_section_context import ConfigSectionContext

        if config.is_resolved() or dict(config) != self.defaults:
            return None
        explicit = explicit_value or {}
        context = Container()[ConfigSectionContext]
        given = tuple((name, explicit[name]) for name in self.fields if name in explicit)
        key = (self.spec, context.pipeline_name, tuple(context.sections), tuple(sections or ()), accept_partial, given)
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def with_contexts(self, config: Any, explicit_value: Any) -> Any:
        """`config` with its context fields as dlt would resolve them now: the explicit
        value, else what dlt's context provider finds in the container."""
        from dlt.common.configuration.container import Container
        from dlt.common.configuration.specs.pluggable_run_context import PluggableRunContext

        explicit = explicit_value or {}
        for name, kind in self.contexts:
            value = explicit.get(name)
            if value is None:
                provider = Container()[PluggableRunContext].providers.context_provider
                value, _ = provider.get_value(name, kind, None)
            setattr(config, name, value)
        return config
