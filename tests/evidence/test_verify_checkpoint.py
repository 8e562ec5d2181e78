"""`diligence verify` extends from what it verified: a checkpoint kept beside the head and
covered by the next seal; the next verify checks what was sealed since, counts the
older row versions and samples them; `--full` takes nothing on trust; `--since` starts
from a seal the caller verified before."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from sandbox.server import SandboxServer
from tests.cli.helpers import CREDENTIALS, run
from tests.evidence.hostile import a_response, read_sealed, sealed, sql, store_of

SINCE = re.compile(r"^verified 1 sync, [\d,]+ responses, [\d,]+ rows; head [0-9a-f]{64}; since the seal "
                   r"[0-9a-f]{12} verified \d{4}-\d\d-\d\d: [\d,]+ older row versions counted, [\d,]+ sampled "
                   r"\(--full checks all\)$")


def _verify(warehouse: Path, *extra: str) -> tuple[int, list[str], str]:
    result = run(["verify", "-w", str(warehouse), *extra], warehouse.parent)
    return result.returncode, result.stderr.splitlines(), result.stdout.strip()


def _sync(server: SandboxServer, warehouse: Path) -> None:
    result = run(["sync", "--base-url", server.base_url, "-w", str(warehouse), "--no-models"], warehouse.parent,
                 CREDENTIALS)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def checkpointed(warehouse: Path, server: SandboxServer) -> Path:
    """The history verified (a checkpoint kept), then one more sync sealed after it."""
    code, errors, output = _verify(warehouse)
    assert code == 0 and output.startswith("verified 2 syncs, "), errors
    _sync(server, warehouse)
    return warehouse


def test_the_next_verify_checks_what_was_sealed_since_the_checkpoint(checkpointed: Path) -> None:
    checkpoint = orjson.loads((store_of(checkpointed) / "syncs" / "VERIFIED").read_bytes())
    newest = read_sealed(sealed(checkpointed)[-1])
    assert newest["header"]["verified"] == {"seal": checkpoint["seal"], "digest": checkpoint["digest"]}  # sealed
    code, errors, output = _verify(checkpointed)
    assert (code, errors) == (0, [])
    assert SINCE.match(output), output
    code, errors, output = _verify(checkpointed, "--full")
    assert (code, errors) == (0, []) and output.startswith("verified 3 syncs, ") and "since" not in output


def test_an_older_row_deleted_is_counted_and_an_older_row_edited_is_found_by_a_full_verify(
        checkpointed: Path) -> None:
    sql(checkpointed, "delete from raw.documents where (namespace_company_id, document_id) in (select "
                      "namespace_company_id, document_id from raw.documents order by all limit 1)")
    code, errors, _output = _verify(checkpointed)
    assert code == 1
    assert any(line.startswith("raw.documents: ") and line.endswith(" (1 deleted)") and "verified seal" in line
               for line in errors), errors
    sql(checkpointed, "update raw.companies set name = 'Forged Ltd' where company_id = (select min(company_id) "
                      "from raw.companies)")
    code, errors, _output = _verify(checkpointed, "--full")
    assert code == 1 and any(" was edited: name differs from its response " in line for line in errors), errors


def test_a_response_altered_since_the_checkpoint_is_found(checkpointed: Path) -> None:
    newest = read_sealed(sealed(checkpointed)[-1])
    table = store_of(checkpointed) / "entries" / newest["entries"][:2] / f"{newest['entries']}.gz"
    assert table.exists()
    response = a_response(checkpointed)
    response.write_bytes(response.read_bytes()[:-8] + b"\0" * 8)
    code, errors, _output = _verify(checkpointed, "--full")
    assert code == 1 and any(response.name.removesuffix(".gz") in line for line in errors), errors


def test_a_checkpoint_edited_is_named_and_everything_is_checked(checkpointed: Path) -> None:
    path = store_of(checkpointed) / "syncs" / "VERIFIED"
    checkpoint = orjson.loads(path.read_bytes())
    checkpoint["rows"] = {table: count - 1 for table, count in checkpoint["rows"].items()}
    path.write_bytes(orjson.dumps(checkpoint))
    code, errors, _output = _verify(checkpointed)
    assert code == 1 and errors == ["syncs/VERIFIED was edited: it does not hash to its digest, and is not used"]


def test_a_checkpoint_rewritten_whole_differs_from_what_the_chain_sealed(checkpointed: Path) -> None:
    from diligence.evidence.checkpoint import Checkpoint, write_checkpoint

    path = store_of(checkpointed) / "syncs" / "VERIFIED"
    found = orjson.loads(path.read_bytes())
    forged = Checkpoint(found["seal"], found["sync_id"], found["synced_at"], found["verified_at"],
                        {table: count + 1 for table, count in found["rows"].items()})
    write_checkpoint(store_of(checkpointed), forged)
    code, errors, _output = _verify(checkpointed)
    newest = sealed(checkpointed)[-1].name.removesuffix(".manifest.gz")
    assert code == 1
    assert f"syncs/VERIFIED is not the checkpoint sync {newest} sealed for the seal {found['seal'][:12]}: it was " \
           "edited since" in errors


def test_since_starts_from_a_seal_verified_before(warehouse: Path, server: SandboxServer) -> None:
    _sync(server, warehouse)
    second = read_sealed(sealed(warehouse)[1])["seal"]["hash"]
    code, errors, output = _verify(warehouse, "--since", second[:10])
    assert (code, errors) == (0, [])
    assert output.startswith("verified 1 sync, ") and f"since the seal {second[:12]} given by --since: " in output
    code, errors, _output = _verify(warehouse, "--since", "deadbeef00")
    assert code == 2 and errors == ["error: --since deadbeef00: no seal or sync of the chain is named so (give a "
                                    "seal's hash, 8 hex digits or more, or a sync id)"]
