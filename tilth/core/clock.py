"""The one wall clock, and UTC timestamps in one format everywhere.

Every read of the wall clock goes through `utc_now` (`local_now` and `wall` are views of it), so a
test or a tool can hold time still at one seam; `time.monotonic()` is for durations and deadlines,
never the wall clock. `tests/test_one_clock.py` fails when a module reads the wall clock itself."""

from datetime import datetime, timezone, tzinfo


def utc_now() -> datetime:
    """Now, aware, in UTC."""
    return datetime.now(timezone.utc)


def local_now(zone: tzinfo | None = None) -> datetime:
    """Now in `zone`, else in this machine's local zone; aware."""
    return utc_now().astimezone(zone)


def wall() -> float:
    """Now in seconds since the epoch: for file modification times and the epoch stamps tilth writes."""
    return utc_now().timestamp()


def iso(moment: datetime | None = None) -> str:
    """ISO-8601 UTC with a Z suffix, second precision: 2026-11-21T21:41:52Z."""
    return (moment or utc_now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc(ts: str | None) -> datetime | None:
    """An ISO time as tilth writes it (`Z` suffix; one without a zone is UTC), aware; None when
    there is none or it is not one."""
    if not ts:
        return None
    try:
        moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def iso_ms(moment: datetime | None = None) -> str:
    """Millisecond precision, for journals where order within a second matters."""
    m = moment or utc_now()
    return m.strftime("%Y-%m-%dT%H:%M:%S.") + f"{m.microsecond // 1000:03d}Z"
