"""analytics.document_expiry: status boundaries, day counts, as_of and the window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest

from diligence.analytics.models import ModelsResult, build_models

from .helpers import by, rows
from .rawdb import AS_OF, connection, create_raw, document, insert

NS = "ns"
FMT = "%Y-%m-%dT%H:%M:%S"


def at(offset: timedelta) -> str:
    return (AS_OF + offset).strftime(FMT)


CASES = {
    # document_id: (expiration_date as sent, expected status, expected days_until_expiry);
    # days are calendar days (UTC here): AS_OF is 12:00 on 1 March 2026
    "yesterday_last_second": ("2026-02-28T23:59:59", "expired", -1),
    "one_second_before_now": (at(-timedelta(seconds=1)), "expiring", 0),
    "today_midnight": ("2026-03-01T00:00:00", "expiring", 0),
    "long_expired": (at(-timedelta(days=400)), "expired", -400),
    "exactly_now": (at(timedelta(0)), "expiring", 0),
    "one_second_after_now": (at(timedelta(seconds=1)), "expiring", 0),
    "today_last_second": ("2026-03-01T23:59:59", "expiring", 0),
    "in_a_day": (at(timedelta(days=1)), "expiring", 1),
    "exactly_now_plus_n": (at(timedelta(days=30)), "expiring", 30),
    "one_second_past_window": (at(timedelta(days=30, seconds=1)), "expiring", 30),
    "last_second_of_window": ("2026-03-31T23:59:59", "expiring", 30),
    "day_after_window": ("2026-04-01T00:00:00", "valid", 31),
    "next_year": (at(timedelta(days=365)), "valid", 365),
    "with_utc_offset": ((AS_OF + timedelta(hours=1)).strftime(FMT) + "+01:00", "expiring", 0),
    "with_z": ("2026-02-28T23:59:59Z", "expired", -1),
    "null": (None, "no_expiry", None),
    "empty": ("", "no_expiry", None),
    "blank": ("   ", "no_expiry", None),
    "unparseable": ("not a date", "invalid_date", None),
    "garbled": ("2026-13-45T00:00:00", "invalid_date", None),
}


def _raw_documents(path: Path) -> Path:
    create_raw(path)
    insert(path, "connections", [connection(NS, "c1", "Acme")])
    insert(
        path,
        "documents",
        [document(NS, "c1", "t1", doc_id, exp) for doc_id, (exp, _, _) in CASES.items()]
        + [document(NS, "c1", "t1", "retired", at(timedelta(days=1)), valid_to=AS_OF)],
    )
    return path


@pytest.fixture
def raw_documents(tmp_path: Path) -> Path:
    return _raw_documents(tmp_path / "warehouse.duckdb")


@pytest.fixture(scope="module")
def built_documents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documents built as of AS_OF with a 30-day window (the default), read-only.
    AS_OF is given in another zone (UTC-5): the boundaries hold only if an aware as_of is
    read as the instant it is."""
    path = _raw_documents(tmp_path_factory.mktemp("expiry") / "warehouse.duckdb")
    build_models(path, as_of=AS_OF.astimezone(timezone(timedelta(hours=-5))), expiring_within_days=30)
    return path


def test_boundaries(built_documents: Path) -> None:
    result = by("document_id", rows(built_documents, "select * from analytics.document_expiry"))
    assert set(result) == set(CASES)  # the retired version is not current
    for doc_id, (_, status, days) in CASES.items():
        assert (doc_id, result[doc_id]["expiry_status"], result[doc_id]["days_until_expiry"]) == (
            doc_id,
            status,
            days,
        )


def test_dates_are_read_as_utc_timestamps(built_documents: Path) -> None:
    result = by("document_id", rows(built_documents, "select * from analytics.document_expiry"))
    exact = result["exactly_now"]
    assert exact["expiration_date"] == AS_OF
    assert exact["issue_date"] == datetime(2025, 1, 1, tzinfo=UTC)
    assert exact["evaluated_at"] == AS_OF
    assert result["with_utc_offset"]["expiration_date"] == AS_OF
    garbled = result["garbled"]
    assert (garbled["expiration_date"], garbled["expiration_date_text"]) == (
        None,
        "2026-13-45T00:00:00",
    )
    assert result["exactly_now"]["expiration_date_text"] == at(timedelta(0))
    types = rows(
        built_documents,
        "select column_name, data_type from information_schema.columns "
        "where table_schema = 'analytics' and table_name = 'document_expiry'",
    )
    types_by_column = {r["column_name"]: r["data_type"] for r in types}
    # one convention: every timestamp of the analytics schema is TIMESTAMPTZ (UTC)
    assert types_by_column["expiration_date"] == "TIMESTAMP WITH TIME ZONE"
    assert types_by_column["evaluated_at"] == "TIMESTAMP WITH TIME ZONE"
    assert types_by_column["days_until_expiry"] == "INTEGER"


def test_days_are_those_of_the_configured_time_zone_and_the_window_counts_them(raw_documents: Path) -> None:
    """At 23:30 UTC on 1 March it is 2 March in Tokyo: a document of 1 March has expired
    there (-1), and one of the next day is due today (0). With a one-day window, one due
    on 3 March (tomorrow in Tokyo) is expiring and one due on 4 March is valid."""
    insert(raw_documents, "documents", [
        document(NS, "c1", "t1", "tokyo_tomorrow", "2026-03-03T00:00:00"),
        document(NS, "c1", "t1", "tokyo_in_two_days", "2026-03-04T00:00:00"),
    ])
    late = AS_OF.replace(hour=23, minute=30)
    result = build_models(raw_documents, as_of=late, time_zone="Asia/Tokyo", expiring_within_days=1)
    assert (result.time_zone, result.expiring_within_days) == ("Asia/Tokyo", 1)
    found = by("document_id", rows(raw_documents, "select * from analytics.document_expiry"))
    assert (found["today_last_second"]["expiry_status"], found["today_last_second"]["days_until_expiry"]) == (
        "expired", -1)
    assert (found["in_a_day"]["expiry_status"], found["in_a_day"]["days_until_expiry"]) == ("expiring", 0)
    assert (found["tokyo_tomorrow"]["expiry_status"], found["tokyo_tomorrow"]["days_until_expiry"]) == (
        "expiring", 1)
    assert (found["tokyo_in_two_days"]["expiry_status"], found["tokyo_in_two_days"]["days_until_expiry"]) == (
        "valid", 2)
    assert found["exactly_now_plus_n"]["expiry_status"] == "valid"  # 29 days: past the window
    with pytest.raises(ValueError, match="not a known time zone"):
        build_models(raw_documents, time_zone="Mars/Olympus")


@pytest.fixture(scope="module")
def built_without_expiration_column(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ModelsResult, datetime, datetime]:
    """A documents table without its expiration column, built with no as_of given (read-
    only); the build, and the UTC times just before and after it."""
    # dlt creates a column only once it has seen a non-null value
    path = create_raw(tmp_path_factory.mktemp("no-expiration") / "warehouse.duckdb", tables=["connections"])
    insert(path, "connections", [connection(NS, "c1", "Acme")])
    with duckdb.connect(str(path)) as con:
        con.execute(
            "create table raw.documents (namespace_company_id VARCHAR, company_id VARCHAR, "
            "company_type_id VARCHAR, document_id VARCHAR, name VARCHAR, "
            "synced_at TIMESTAMPTZ, _dlt_valid_from TIMESTAMPTZ, _dlt_valid_to TIMESTAMPTZ)"
        )
        con.execute(
            "insert into raw.documents values ('ns', 'c1', 't1', 'd1', 'a.pdf', now(), now(), null)"
        )
    before = datetime.now(UTC).replace(tzinfo=None)
    result = build_models(path)
    after = datetime.now(UTC).replace(tzinfo=None)
    return path, result, before, after


def test_default_as_of_is_build_time(
    built_without_expiration_column: tuple[Path, ModelsResult, datetime, datetime],
) -> None:
    path, result, before, after = built_without_expiration_column
    assert before <= result.as_of <= after
    evaluated = rows(path, "select distinct evaluated_at from analytics.document_expiry")
    assert [r["evaluated_at"] for r in evaluated] == [result.as_of.replace(tzinfo=UTC)]


def test_missing_expiration_column_means_no_expiry(
    built_without_expiration_column: tuple[Path, ModelsResult, datetime, datetime],
) -> None:
    path = built_without_expiration_column[0]
    result = rows(path, "select * from analytics.document_expiry")
    assert [(r["document_id"], r["expiry_status"], r["expiration_date"]) for r in result] == [
        ("d1", "no_expiry", None)
    ]


@pytest.mark.parametrize("bad", [-1, 1.5, "30", True])
def test_invalid_window(tmp_path: Path, bad: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        build_models(tmp_path / "w.duckdb", expiring_within_days=bad)  # type: ignore[arg-type]


def test_a_rendered_macro_classes_dates_by_the_marts_own_rule() -> None:
    """`render_macro` gives Python-side queries the project's own rule: classing each
    case's date with the rendered `expiry_status` gives the statuses that
    document_expiry gives."""
    from diligence.analytics.dbt import render_macro, render_macros
    from diligence.errors import DbtError

    rule = render_macro("expiry_status", "expiration_date", "is_invalid", "?::timestamptz",
                        "?::integer")
    with duckdb.connect() as con:
        con.execute("set TimeZone = 'UTC'")
        for document_id, (sent, expected, _) in CASES.items():
            parsed = con.execute(
                "select try_cast(nullif(trim(?), '') as timestamptz), "
                "nullif(trim(?), '') is not null and try_cast(nullif(trim(?), '') as timestamptz) is null",
                [sent, sent, sent]).fetchone()
            assert parsed is not None
            status = con.execute(
                f"select {rule} from (select ?::timestamptz as expiration_date, ?::boolean as is_invalid)",
                [AS_OF.replace(tzinfo=UTC), AS_OF.replace(tzinfo=UTC), 30, *parsed]).fetchone()
            assert status == (expected,), document_id
    with pytest.raises(DbtError, match="could not render macro no_such_macro"):
        render_macro("no_such_macro", "x")
    # a failed render leaves nothing behind for the next one
    assert render_macro("expiry_status", "expiration_date", "is_invalid", "?::timestamptz",
                        "?::integer") == rule
    # several macros in one invocation give what each gives alone, in their order
    watermark = render_macro("is_after_watermark", {"ns-1": "2026-01-01T00:00:00+00:00"}, ["valid_from"])
    assert render_macros([("is_after_watermark", ({"ns-1": "2026-01-01T00:00:00+00:00"}, ["valid_from"])),
                          ("expiry_status", ("expiration_date", "is_invalid", "?::timestamptz", "?::integer"))]
                         ) == [watermark, rule]
