"""Engines the conformance suite can check: ``hudi_format``, ``hudi-rs`` and ``cmd:<command>``."""

from __future__ import annotations

from .base import Engine, Unsupported

ENGINES = ("hudi_format", "hudi-rs")


def get_engine(spec: str) -> Engine:
    """``hudi_format``, ``hudi-rs`` or ``cmd:<command line>`` (an external engine speaking the
    JSON-lines protocol of ``conformance/adapters/command.py``)."""
    if spec in ("hudi_format", "hudi-format", "ours"):
        from .hudi_format import HudiFormatEngine
        return HudiFormatEngine()
    if spec in ("hudi-rs", "hudi_rs"):
        from .hudi_rs import HudiRsEngine
        return HudiRsEngine()
    if spec.startswith("cmd:"):
        from .command import CommandEngine
        return CommandEngine(spec[4:])
    raise ValueError(f"unknown engine {spec!r}: use hudi_format, hudi-rs or cmd:<command>")


__all__ = ["Engine", "Unsupported", "get_engine", "ENGINES"]
