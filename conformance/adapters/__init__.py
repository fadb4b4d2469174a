"""Engines the conformance suite can check: ``hudi_format``, ``hudi-rs`` and ``cmd:<command>``."""

from __future__ import annotations

from .base import Engine, Unsupported

ENGINES = ("hudi_format", "hudi-rs")
_OURS = ("hudi_format", "hudi-format", "ours")
_HUDI_RS = ("hudi-rs", "hudi_rs")


def check_engine(spec: str) -> None:
    """Fail on an engine name :func:`get_engine` does not know, before any table is generated
    for it (a typo used to cost the whole generation first)."""
    if spec not in _OURS + _HUDI_RS and not spec.startswith("cmd:"):
        raise ValueError(f"unknown engine {spec!r}: use hudi_format, hudi-rs or cmd:<command>")


def get_engine(spec: str) -> Engine:
    """``hudi_format``, ``hudi-rs`` or ``cmd:<command line>`` (an external engine speaking the
    JSON-lines protocol of ``conformance/adapters/command.py``)."""
    check_engine(spec)
    if spec in _OURS:
        from .hudi_format import HudiFormatEngine
        return HudiFormatEngine()
    if spec in _HUDI_RS:
        from .hudi_rs import HudiRsEngine
        return HudiRsEngine()
    from .command import CommandEngine
    return CommandEngine(spec[4:])


__all__ = ["Engine", "Unsupported", "check_engine", "get_engine", "ENGINES"]
