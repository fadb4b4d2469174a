"""The option registry: one typed descriptor per ``hoodie.*`` key, one parser per type.

Users paste option maps from their Spark jobs, so every key is Hudi's own, with Hudi's default.
Each key is declared once (in the scope module that owns it: read, write, service, metadata,
lock); validation, defaults, parsing and ``docs/options.md`` all come from that declaration, so
a default or a boolean spelling can no longer differ between two corners of the code.

This module is the bottom (config) layer: it imports nothing of ``hudi_format`` but errors.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Iterator, Mapping

import attrs

from ..errors import InvalidOptionError

#: where an option takes effect; ``validate`` accepts the keys of the scopes its caller runs
SCOPES = ("read", "write", "service", "metadata", "lock")
#: the value types; ``any`` keeps the value as given (Spark-only keys, prefix families)
TYPES = ("bool", "int", "float", "str", "choice", "any")
#: what a write takes: it runs inline services, updates the metadata table and takes the lock
WRITE_SCOPES = ("write", "service", "metadata", "lock")
#: what a table service takes: it writes files like a write and commits under the same protocol
SERVICE_SCOPES = WRITE_SCOPES
#: what a reader takes
READ_SCOPES = ("read",)


def parse_bool(key: str, value: Any) -> bool:
    """Hudi's booleans: ``true``/``false`` in any case (Java's ``Boolean`` spelling), or a Python
    bool. Anything else is refused rather than read as false, as ``Boolean.parseBoolean`` would:
    ``"yes"`` silently meaning false is a table written the wrong way."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidOptionError(f"option {key} must be true or false, got {value!r}")


def parse_int(key: str, value: Any) -> int:
    """An integer, from an int or its decimal text (Hudi keeps every option as a string)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidOptionError(f"option {key} must be an integer, got {value!r}") from None


def parse_float(key: str, value: Any) -> float:
    """A float, from a number or its text."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidOptionError(f"option {key} must be a number, got {value!r}") from None


def parse_choice(key: str, value: Any, allowed: tuple[str, ...]) -> str:
    """One of ``allowed``, matched case-insensitively (Hudi's enums are ``valueOf``'d after
    upper-casing), returned in its declared spelling."""
    text = str(value).strip().lower()
    for choice in allowed:
        if text == choice.lower():
            return choice
    raise InvalidOptionError(f"option {key} must be one of {list(allowed)}, got {value!r}")


def _check_type(instance: "OptionSpec", attribute: Any, value: str) -> None:
    if value not in TYPES:
        raise ValueError(f"option {instance.key}: type {value!r} is not one of {TYPES}")


def _check_scope(instance: "OptionSpec", attribute: Any, value: str) -> None:
    if value not in SCOPES:
        raise ValueError(f"option {instance.key}: scope {value!r} is not one of {SCOPES}")


@attrs.frozen
class OptionSpec:
    """One option: Hudi's key, its type and default, what it does and where it applies.

    ``default`` is ``None`` when Hudi has none (the value is then derived, e.g. from the table's
    properties). ``aliases`` are other keys Hudi accepts for it (``withAlternatives``);
    ``also`` lists further scopes that accept the key besides its own ``scope``; ``minimum``
    bounds integers. A key ending in ``.*`` declares a family of keys (``hoodie.keygen.timebased.*``).
    """

    key: str
    type: str = attrs.field(validator=_check_type)
    default: Any
    doc: str
    scope: str = attrs.field(validator=_check_scope)
    allowed: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
    minimum: int | None = None
    between: tuple[float, float] | None = None    # a float's open interval

    @property
    def is_family(self) -> bool:
        return self.key.endswith(".*")

    @property
    def scopes(self) -> tuple[str, ...]:
        return (self.scope,) + self.also

    def parse(self, value: Any, key: str | None = None) -> Any:
        """``value`` as this option's type, range-checked; ``None`` stays ``None`` (unset).
        Parsing is idempotent, so already validated maps parse to themselves."""
        name = key or self.key
        if value is None or self.type == "any":
            return value
        if self.type == "bool":
            return parse_bool(name, value)
        if self.type == "int":
            out = parse_int(name, value)
            if self.minimum is not None and out < self.minimum:
                what = "positive" if self.minimum == 1 else f"at least {self.minimum}"
                if self.minimum == 0:
                    raise InvalidOptionError(f"option {name} must not be negative, got {out}")
                raise InvalidOptionError(f"option {name} must be {what}, got {out}")
            return out
        if self.type == "float":
            number = parse_float(name, value)
            if self.between is not None and not self.between[0] < number < self.between[1]:
                raise InvalidOptionError(f"option {name} must be in ({self.between[0]:g}, {self.between[1]:g}), "
                                         f"got {number}")
            return number
        if self.type == "choice":
            return parse_choice(name, value, self.allowed)
        return str(value)


_SPECS: dict[str, OptionSpec] = {}
_ORDERED: list[tuple[str, str]] = []     # (lower, higher): the first must stay below the second
_ALIASES: dict[str, str] = {}
_FAMILIES: dict[str, OptionSpec] = {}     # prefix (without the ``*``) -> spec


def declare(*specs: OptionSpec) -> None:
    """Add ``specs`` to the registry. A key or alias declared twice is a programming error:
    two declarations are two defaults waiting to drift apart."""
    for spec in specs:
        names = (spec.key,) + spec.aliases
        for name in names:
            if name in _SPECS or name in _ALIASES or name[:-1] in _FAMILIES:
                raise ValueError(f"option {name} is declared twice")
        if spec.type == "choice" and (not spec.allowed or
                                      (spec.default is not None and spec.default not in spec.allowed)):
            raise ValueError(f"option {spec.key}: a choice needs allowed values including its default")
        if spec.is_family:
            _FAMILIES[spec.key[:-1]] = spec
            continue
        _SPECS[spec.key] = spec
        for alias in spec.aliases:
            _ALIASES[alias] = spec.key


def lookup(key: str) -> OptionSpec | None:
    """The spec of ``key`` (a canonical key, an alias or a member of a family), else ``None``."""
    spec = _SPECS.get(key) or _SPECS.get(_ALIASES.get(key, ""))
    if spec is not None:
        return spec
    for prefix, family in _FAMILIES.items():
        if key.startswith(prefix):
            return family
    return None


def spec(key: str) -> OptionSpec:
    """The spec of a canonical or alias key; ``KeyError`` for a key the code never declared."""
    found = lookup(key)
    if found is None:
        raise KeyError(f"option {key} is not in the registry")
    return found


def default(key: str) -> Any:
    """Hudi's default of ``key`` (``None`` when it has none)."""
    return spec(key).default


def all_specs(scopes: Iterable[str] = SCOPES) -> Iterator[OptionSpec]:
    """Every declared option (families included) accepted by one of ``scopes``, by key."""
    wanted = set(scopes)
    everything = list(_SPECS.values()) + list(_FAMILIES.values())
    for item in sorted(everything, key=lambda s: (s.scope, s.key)):
        if wanted.intersection(item.scopes):
            yield item


def specs(scope: str) -> dict[str, OptionSpec]:
    """The options declared with ``scope`` as their own scope, key -> spec."""
    return {s.key: s for s in all_specs((scope,)) if s.scope == scope and not s.is_family}


def option(opts: Mapping[str, Any] | None, key: str) -> Any:
    """The parsed value of ``key`` in ``opts`` (under its key or an alias), else its default.

    The one accessor: callers never repeat a default or parse a value themselves. ``None``
    counts as unset. Parsing is idempotent, so validated and raw maps both work.
    """
    item = _SPECS[key]
    if opts:
        for name in (key,) + item.aliases:
            value = opts.get(name)
            if value is not None:
                return item.parse(value, name)
    return item.default


def _label(scopes: tuple[str, ...]) -> str:
    if "write" in scopes:
        return "write"
    if "service" in scopes:
        return "table service"
    return scopes[0] if scopes else "any"


def declare_below(lower: str, higher: str) -> None:
    """Option ``lower`` must stay below option ``higher`` (defaults count where one is not given):
    checked when either is given, before anything runs."""
    _ORDERED.append((lower, higher))


def _check_order(out: Mapping[str, Any]) -> None:
    for lower, higher in _ORDERED:
        if lower in out or higher in out:
            lo, hi = option(out, lower), option(out, higher)
            if lo is not None and hi is not None and not lo < hi:
                raise InvalidOptionError(f"option {higher} ({hi}) must be greater than {lower} ({lo})")


def validate(options: Mapping[str, Any] | None, scopes: Iterable[str] = WRITE_SCOPES,
             what: str | None = None) -> dict[str, Any]:
    """Check every key of ``options`` against the registry and parse every value.

    Returns a new map under canonical keys (aliases renamed). An unknown key names the closest
    known one; a key of a scope the caller does not run says where it belongs; a bad value
    names the key and what it accepts. ``what`` names the caller in messages ("write", ...).
    """
    scopes = tuple(scopes)
    label = what or _label(scopes)
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise InvalidOptionError(f"options must be a mapping of hoodie.* keys to values, got {options!r}")
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise InvalidOptionError(f"option keys are hoodie.* strings, got {key!r}")
        item = lookup(key)
        if item is None:
            known = [s.key for s in all_specs(scopes) if not s.is_family]
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidOptionError(f"unknown {label} option {key!r}{hint}")
        if not set(item.scopes).intersection(scopes):
            raise InvalidOptionError(f"option {key!r} is a {item.scope} option; a {label} does not take it")
        name = key if item.is_family else item.key
        parsed = item.parse(value, key)
        if name in out and name in given and out[name] != parsed:
            raise InvalidOptionError(f"options {given[name]!r} and {key!r} are the same option "
                                     f"with different values ({out[name]!r}, {parsed!r})")
        out[name] = parsed
        given[name] = key
    _check_order(out)
    return out


def values(opts: Mapping[str, Any] | None, keys: Iterable[str]) -> dict[str, Any]:
    """``key -> option(opts, key)`` for ``keys``: the parsed values a service reads at once
    (other keys of ``opts`` are ignored: inline services receive the whole write option map)."""
    return {key: option(opts, key) for key in keys}