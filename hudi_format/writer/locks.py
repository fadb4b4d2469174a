"""Moved to :mod:`hudi_format.transaction.locks` (the commit protocol's layer): this name is an
alias of that module, kept for existing imports."""

import sys

from ..transaction import locks as _moved

sys.modules[__name__] = _moved
