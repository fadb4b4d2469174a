"""Java behaviour that Hudi's bytes depend on: ``String.hashCode``, the iteration order of a
``java.util.HashMap`` and Jackson's pretty-printed JSON.

Hudi serializes maps (commit metadata's ``partitionToWriteStats``, ``hoodie.properties``) in the
order Java iterates them, and v6 commit metadata as Jackson prints it, so writing byte-compatible
files needs both. It lives at the bottom of the package because the timeline writer and table
creation (a lower layer than the timeline) use it.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping

from .errors import InvalidOptionError

__all__ = ["java_string_hash", "hashmap_spread", "java_hashmap_order", "jackson_json"]


def java_string_hash(s: str) -> int:
    """``java.lang.String.hashCode`` (over UTF-16 code units), as an unsigned 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def hashmap_spread(h: int) -> int:
    """``HashMap.hash``: the high bits folded into the low ones that pick the bucket."""
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a ``java.util.HashMap`` (default capacity) filled with ``keys`` in order.

    Buckets are visited in index order; keys sharing a bucket keep their insertion order (a
    resize splits buckets without reordering them). Tree bins (8+ keys in one bucket) are not
    modelled.
    """
    keys = list(dict.fromkeys(keys))
    n = 16
    while len(keys) > n * 3 // 4:
        n *= 2
    return sorted(keys, key=lambda k: hashmap_spread(java_string_hash(k)) & (n - 1))  # stable


# -- Jackson's DefaultPrettyPrinter ---------------------------------------------------------

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                  "\r": "\\r", "\t": "\\t"}


# what Jackson escapes: the quote, the backslash and the control characters (nothing else)
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')


def _escape_one(m: "re.Match[str]") -> str:
    c = m.group()
    return _SHORT_ESCAPES.get(c) or "\\u%04X" % ord(c)


def _json_string(s: str) -> str:
    # a regex pass, not a character loop: a commit's metadata quotes ~60 strings per file
    return '"' + _NEEDS_ESCAPE.sub(_escape_one, s) + '"'


def _java_double(x: float) -> str:
    """``Double.toString`` (shortest repr digits, Java's plain/scientific switch)."""
    if math.isnan(x):
        return '"NaN"'
    if math.isinf(x):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    digits, exp = _decimal_digits(abs(x))  # value = 0.d1d2... * 10**exp
    if 1e-3 <= abs(x) < 1e7:
        point = exp
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        intpart = digits[:point].ljust(point, "0")
        frac = digits[point:] or "0"
        return f"{sign}{intpart}.{frac}"
    frac = digits[1:] or "0"
    return f"{sign}{digits[0]}.{frac}E{exp - 1}"


def _decimal_digits(x: float) -> tuple[str, int]:
    mantissa, _, e = f"{x!r}".partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    lead = len(whole.lstrip("0")) if whole.strip("0") else -(len(frac) - len(frac.lstrip("0")))
    exp = lead + (int(e) if e else 0)
    return digits.rstrip("0") or "0", exp


def jackson_json(value: Any) -> str:
    """``ObjectMapper.writerWithDefaultPrettyPrinter().writeValueAsString`` of plain values."""
    out: list[str] = []
    _pretty(value, 0, out)
    return "".join(out)


def _pretty(v: Any, level: int, out: list[str]) -> None:
    if isinstance(v, Mapping):
        if not v:
            out.append("{ }")
            return
        out.append("{")
        pad = "\n" + "  " * (level + 1)
        for i, (k, x) in enumerate(v.items()):
            out.append(("," if i else "") + pad + _json_string(str(k)) + " : ")
            _pretty(x, level + 1, out)
        out.append("\n" + "  " * level + "}")
    elif isinstance(v, (list, tuple)):
        if not v:
            out.append("[ ]")
            return
        out.append("[ ")
        for i, x in enumerate(v):
            if i:
                out.append(", ")
            _pretty(x, level, out)
        out.append(" ]")
    elif v is None:
        out.append("null")
    elif isinstance(v, bool):
        out.append("true" if v else "false")
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        out.append(_java_double(v))
    elif isinstance(v, str):
        out.append(_json_string(v))
    else:
        raise InvalidOptionError(f"cannot write {type(v).__name__} value {v!r} as JSON metadata")
