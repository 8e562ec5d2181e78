"""Validate a schedule (cron and IANA time zone) before anything is served or printed.

`diligence schedule` checks both first, so a typo ends in one line and exit code 2,
instead of a banner followed by a Prefect validation traceback.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from ..errors import ScheduleError

__all__ = ["ScheduleError", "validate_schedule"]


def validate_schedule(cron: str, timezone: str) -> None:
    """Raise :class:`ScheduleError` unless `cron` is a 5-field cron (croniter's rules,
    as Prefect's CronSchedule) and `timezone` an IANA zone name."""
    fields = cron.split()
    if len(fields) != 5 or not croniter.is_valid(cron):
        raise ScheduleError(
            f"--cron {cron!r} is not a valid cron (5 fields: minute hour day month weekday, "
            "e.g. '0 6 * * *')"
        )
    try:
        if not timezone or timezone != timezone.strip():
            raise ValueError(timezone)
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"--timezone {timezone!r} is not an IANA time zone (e.g. UTC, Europe/Paris)"
        ) from None
