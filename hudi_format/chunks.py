"""One Arrow array from a column that may come chunked.

Kernels over several columns (masks, takes, buffer views) want plain arrays aligned row for
row; tables read or concatenated hand out chunked ones. A single chunk is used as it is:
``combine_chunks`` would copy it.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["one_array"]


def one_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``col`` as one array: itself, its only chunk, or its chunks concatenated."""
    if isinstance(col, pa.ChunkedArray):
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col
