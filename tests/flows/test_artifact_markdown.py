"""The run summary artifact shows counterparty text as text: no link, image or HTML."""

from __future__ import annotations

from diligence.safe_text import markdown_text, terminal_text
from diligence.sync import NamespaceOutcome
from flows.report import summary_markdown

HOSTILE = '![x](http://evil.test/p.png) [Open](http://evil.test/?leak=1) <img src=x onerror=alert(1)>\x1b]0;owned\x07'


def test_summary_markdown_escapes_upstream_text() -> None:
    outcome = NamespaceOutcome("ns`) [a](http://evil.test)", "failed", 1, 0, 0, 0.1, error=HOSTILE)
    markdown = summary_markdown([outcome], row_counts={}, checks=[], exported=[])
    assert "![x](http" not in markdown and "[Open](http" not in markdown
    assert " <img" not in markdown and "\x1b" not in markdown
    assert "\\!\\[x\\](http://evil.test/p.png)" in markdown
    assert "\\<img src=x onerror=alert(1)\\>" in markdown
    assert "`ns') [a](http://evil.test)`" in markdown  # inside a code span: shown, never a link


def test_terminal_text_shows_control_characters_escaped() -> None:
    assert terminal_text("a\x1b[2Jb\x9b31m\r\n\x07c") == "a\\x1b[2Jb\\x9b31m\\x0d\\x0a\\x07c"
    assert terminal_text("Åse & Co. – ok") == "Åse & Co. – ok"


def test_markdown_text_is_one_line_without_markup() -> None:
    # renders as `a|b\x0a*c*`: one cell, no emphasis, the line break shown
    assert markdown_text("a|b\n*c*") == "a\\|b\\\\x0a\\*c\\*"


def test_expiring_documents_table_shows_controls_escaped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import duckdb

    from diligence.warehouse import Warehouse
    from flows.report import expiring_documents_table

    warehouse = tmp_path / "w.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute("create schema analytics")
        con.execute(
            "create table analytics.document_expiry as select 'ns' as namespace_company_id, "
            "'c1' as company_id, ? as company_name, 't1' as company_type_id, 'd1' as document_id, "
            "? as document_name, 'cat' as category, 'pdf' as type, date '2026-01-01' as expiration_date, "
            "-3 as days_until_expiry, 'expired' as expiry_status",
            [HOSTILE, "\x1b[31mred\x1b[0m"],
        )
    rows, total = expiring_documents_table(Warehouse(warehouse))
    assert total == 1
    assert "\x1b" not in rows[0]["company_name"] + rows[0]["document_name"]
    assert rows[0]["document_name"] == "\\x1b[31mred\\x1b[0m"
    assert rows[0]["expiration_date"] == "2026-01-01"
