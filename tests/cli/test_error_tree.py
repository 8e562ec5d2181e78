"""One error tree: every error of diligence/ and flows/ is defined in diligence/errors.py
and derives from DiligenceError, the client's from its own root SourceError, and the
CLI maps both roots to exit codes."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
import typer

from diligence.cli import EXIT_FAILED, EXIT_USAGE, handle_errors
from diligence.errors import CommandError, DiligenceError, ExportError, SyncError, raised_on_purpose
from pipelines.company_connections import errors as client_errors
from tests.helpers import kept_logging

ROOT = Path(__file__).resolve().parents[2]


def _exception_classes(folder: str) -> list[tuple[str, str]]:
    """(module, class) of every class in `folder` whose base is named *Error/*Exception."""
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(base).endswith(("Error", "Exception", "Failed")) for base in node.bases
            ):
                module = relative.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
                found.append((module, node.name))
    return found


PRODUCT_ERRORS = _exception_classes("diligence") + _exception_classes("flows")


def test_the_product_errors_are_found_in_one_module() -> None:
    names = {name for _, name in PRODUCT_ERRORS}
    assert {"CommandError", "ExportError", "ReportError", "ModelError", "RunFailedError"} <= names
    assert {module for module, _ in PRODUCT_ERRORS} == {"diligence.errors"}


@pytest.mark.parametrize(("module", "name"), PRODUCT_ERRORS)
def test_every_product_error_derives_from_the_one_root(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, DiligenceError), f"{module}.{name} is not a DiligenceError"


def test_the_client_has_its_own_root() -> None:
    for name in client_errors.__all__:
        cls = getattr(client_errors, name)
        if isinstance(cls, type):
            assert issubclass(cls, client_errors.SourceError) and not issubclass(cls, DiligenceError)
    assert not hasattr(client_errors, "DiligenceError")
    assert raised_on_purpose(client_errors.ConfigurationError("no base_url"))
    assert raised_on_purpose(SyncError("login rejected"))
    assert not raised_on_purpose(ValueError("a bug"))


def _exit(exc: BaseException, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    @handle_errors
    def command() -> None:
        raise exc

    with kept_logging(), pytest.raises(typer.Exit) as raised:
        command()
    return raised.value.exit_code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (CommandError("--format must be csv or parquet", EXIT_USAGE), EXIT_USAGE, "--format must be"),
        (ExportError("warehouse x does not exist"), EXIT_FAILED, "warehouse x does not exist"),
        (client_errors.ConfigurationError("base_url is not set"), EXIT_FAILED, "base_url is not set"),
        (
            client_errors.AuthenticationError("login rejected", method="POST", path="/api/auth", status_code=401),
            EXIT_FAILED,
            "POST /api/auth: HTTP 401: login rejected",
        ),
    ],
)
def test_the_cli_maps_both_roots(
    error: BaseException, code: int, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    exit_code, err = _exit(error, capsys)
    assert exit_code == code
    assert line in err and "--debug" not in err and type(error).__name__ not in err


def test_anything_else_is_a_bug_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    exit_code, err = _exit(ValueError("unexpected"), capsys)
    assert exit_code == EXIT_FAILED
    assert "ValueError: unexpected" in err and "--debug" in err
