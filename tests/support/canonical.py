"""Re-export of the conformance suite's row canonicalisation (conformance/canonical.py)."""

from conformance.canonical import _canon, canonical_rows, sort_expected  # noqa: F401
