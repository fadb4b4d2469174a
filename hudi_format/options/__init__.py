"""Typed options: every ``hoodie.*`` key this engine reads, declared once with Hudi's default.

``validate(options, scopes)`` checks a user's option map (unknown keys name the closest known
one, aliases become canonical keys); ``option(opts, key)`` reads one value, parsed, or its
default. ``docs/options.md`` is generated from the same declarations
(``python -m hudi_format.options.docs``).
"""

from __future__ import annotations

from . import lock, metadata, read, services, write  # noqa: F401  - declare every scope
from .registry import (READ_SCOPES, SCOPES, SERVICE_SCOPES, TYPES, WRITE_SCOPES, OptionSpec, all_specs,
                       default, lookup, option, parse_bool, spec, specs, validate, values)
from .write import OPERATIONS

__all__ = ["OptionSpec", "validate", "option", "default", "spec", "specs", "lookup", "all_specs",
           "parse_bool", "values", "SCOPES", "TYPES", "READ_SCOPES", "WRITE_SCOPES",
           "SERVICE_SCOPES", "OPERATIONS"]
