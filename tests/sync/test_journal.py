"""The request journal on its own: a crash at any byte leaves a readable file, torn
tails are cut off before appending, and answers come back exactly as parsed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from pipelines.company_connections.journal import (
    JournalBook,
    JournalIdentity,
    RequestJournal,
    journal_summaries,
)
from pipelines.company_connections.models import Company, Document, Questionnaire, adapter

NOW = datetime(2026, 11, 25, 14, 2, tzinfo=timezone.utc)
IDENTITY = JournalIdentity.of("https://platform.example.com/", "analyst@example.com")


def _book(root: Path, *, at: datetime = NOW, identity: JournalIdentity = IDENTITY,
          restart: bool = False) -> JournalBook:
    return JournalBook(root, identity, sync_id=f"sync-{at:%H%M%S}", started_at=at,
                       resume_within=24 * 3600, restart=restart)


def _write(root: Path, entries: int) -> Path:
    journal = _book(root).open("ns-1")
    for n in range(entries):
        company = Company.model_validate({"id": f"c{n}", "name": f"Company {n}", "vatNumber": n})
        journal.record("company", f"c{n}", None, company)
    journal.record("questionnaire", "c0", "t1", status=403, message="denied")
    journal.close()
    return journal.path


def test_answers_come_back_exactly_as_parsed(tmp_path: Path) -> None:
    journal = _book(tmp_path).open("ns-1")
    company = Company.model_validate({"id": "c1", "name": "Acme", "country": "FR", "extra": {"a": 1}})
    forms = Questionnaire.from_body({"questionnaires": {"forms": [{"id": "f", "fields": [1, "x"]}]}})
    documents = adapter(list[Document]).validate_python([{"id": "d1", "name": "a.pdf", "issueDate": "2026-01-01",
                                                          "custom": [1, 2]}])
    journal.record("company", "c1", None, company)
    journal.record("questionnaire", "c1", "t1", forms)
    journal.record("documents", "c1", "t1", documents)
    journal.record("documents", "c2", "t1", status=404, message="gone")
    journal.close()

    resumed = _book(tmp_path, at=NOW + timedelta(minutes=30)).open("ns-1")
    assert resumed.kept == 4 and resumed.since == NOW
    assert resumed.lookup("company", "c1", None).answer == company
    assert resumed.lookup("questionnaire", "c1", "t1").answer.raw_forms == forms.raw_forms
    again = resumed.lookup("documents", "c1", "t1").answer
    assert [d.raw for d in again] == [d.raw for d in documents] and again == documents
    gone = resumed.lookup("documents", "c2", "t1")
    assert (gone.status, gone.message, gone.answer) == (404, "gone", None)
    assert resumed.lookup("company", "c9", None) is None
    resumed.close()


def test_a_crash_at_any_byte_leaves_a_readable_prefix(tmp_path: Path) -> None:
    whole = _write(tmp_path / "whole", 20).read_bytes()
    kept_before = -1
    for cut in [*range(0, len(whole), 7), len(whole)]:
        root = tmp_path / f"cut-{cut}"
        root.mkdir()
        path = _book(root).path("ns-1")
        path.write_bytes(whole[:cut])
        found = journal_summaries(root)
        kept = found[0].kept if found else 0
        assert kept >= max(kept_before, 0)  # never fewer entries for a longer prefix
        kept_before = kept
        journal = _book(root, at=NOW + timedelta(minutes=5)).open("ns-1")
        journal.record("company", "new", None, Company(id="new"))
        journal.close()
        # The torn tail is gone: what was appended after it reads back.
        reopened = _book(root, at=NOW + timedelta(minutes=10)).open("ns-1")
        if found:
            assert reopened.kept == kept + 1
            assert reopened.lookup("company", "new", None).answer == Company(id="new")
        reopened.close()
    assert kept_before == 21


def test_another_account_url_or_age_is_not_resumed(tmp_path: Path) -> None:
    _write(tmp_path, 3)
    assert _book(tmp_path).resumable
    other_account = JournalIdentity.of("https://platform.example.com", "someone@example.com")
    other_url = JournalIdentity.of("https://staging.example.com", "analyst@example.com")
    selected = JournalIdentity.of("https://platform.example.com", "analyst@example.com", ["documents"])
    for identity in (other_account, other_url, selected):
        assert not _book(tmp_path, identity=identity).resumable
    assert not _book(tmp_path, at=NOW + timedelta(hours=25)).resumable
    assert not _book(tmp_path, restart=True).resumable
    assert _book(tmp_path, at=NOW + timedelta(hours=23)).resumable


def test_files_are_owner_only_and_hold_no_account_name(tmp_path: Path) -> None:
    path = _write(tmp_path / "journals", 2)
    assert path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "journals").stat().st_mode & 0o777 == 0o700
    assert b"analyst@example.com" not in path.read_bytes()


def test_discard_deletes_the_file(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path / "x.journal")
    journal.discard()
    assert not (tmp_path / "x.journal").exists()
