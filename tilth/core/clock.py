"""UTC timestamps in one format everywhere."""

from datetime import datetime, timezone


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def iso(moment: datetime | None = None) -> str:
    """ISO-8601 UTC with a Z suffix, second precision: 2026-11-21T21:41:52Z."""
    return (moment or utc_now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_ms(moment: datetime | None = None) -> str:
    """Millisecond precision, for journals where order within a second matters."""
    m = moment or utc_now()
    return m.strftime("%Y-%m-%dT%H:%M:%S.") + f"{m.microsecond // 1000:03d}Z"
