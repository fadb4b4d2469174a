"""Moved to :mod:`hudi_format.transaction.heartbeat` (the commit protocol's layer): this name is an
alias of that module, kept for existing imports."""

import sys

from ..transaction import heartbeat as _moved

sys.modules[__name__] = _moved
