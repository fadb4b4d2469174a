"""Turn the instants users pass (`as_of`, `start`, `end`) into Hudi timeline strings.

Accepted, as hudi-rs accepts them: ``yyyyMMddHHmmssSSS`` or ``yyyyMMddHHmmss`` timeline
strings, Unix epochs (s, ms, us, ns), RFC 3339 strings with an offset, and ``datetime``
objects. Instants are rendered in the table's timeline time zone (UTC or the local zone).
"""

from __future__ import annotations

import datetime as dt
import re

from ..errors import InvalidOptionError

_TIMELINE_RE = re.compile(r"^\d{14}(\d{3})?$")
_EPOCH_RE = re.compile(r"^\d{1,19}$")


def _render(ts: dt.datetime, timezone: str) -> str:
    if ts.tzinfo is None:
        ts = ts.astimezone() if timezone != "UTC" else ts.replace(tzinfo=dt.timezone.utc)
    target = dt.timezone.utc if timezone == "UTC" else None
    local = ts.astimezone(target)
    return local.strftime("%Y%m%d%H%M%S") + f"{local.microsecond // 1000:03d}"


def normalize_instant(value, timezone: str = "LOCAL", what: str = "instant") -> str | None:
    """Return a 17-digit timeline string for ``value`` (``None`` stays ``None``)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return _render(value, timezone)
    if isinstance(value, dt.date):
        raise InvalidOptionError(f"{what}: a date alone is ambiguous; pass a datetime")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise InvalidOptionError(f"{what}: expected an instant string or datetime, got {value!r}")
    text = value.strip()
    if text == "0":
        return "0"
    if _TIMELINE_RE.match(text):
        return text if len(text) == 17 else text + "000"
    if _EPOCH_RE.match(text):
        n = int(text)
        digits = len(text)
        if digits <= 10:
            seconds = n
        elif digits <= 13:
            seconds = n / 1e3
        elif digits <= 16:
            seconds = n / 1e6
        else:
            seconds = n / 1e9
        return _render(dt.datetime.fromtimestamp(seconds, dt.timezone.utc), timezone)
    if "T" in text or " " in text:
        try:
            parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return _render(parsed, timezone)
    raise InvalidOptionError(
        f"{what}: {value!r} is not an instant; use yyyyMMddHHmmss[SSS], a Unix epoch, "
        f"an RFC 3339 time with an offset, or a datetime")
