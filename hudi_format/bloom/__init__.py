"""Hudi's record-key bloom filters (see :mod:`.filters`) and their hashing (:mod:`.murmur`).

Split by concern; every public name stays importable from ``hudi_format.bloom``.
"""

from .filters import (DEFAULT_FPP, DEFAULT_MAX_ENTRIES, DEFAULT_NUM_ENTRIES, DEFAULT_TYPE_CODE,
                      DYNAMIC_V0, JENKINS_HASH, MURMUR_HASH, SIMPLE, BloomFilter, DynamicBloomFilter,
                      SimpleBloomFilter, bit_size, holds_as_is, new_bloom_filter, num_hashes, resume)
from .murmur import hash_positions, hash_positions_all, murmur_hash

__all__ = ["BloomFilter", "SimpleBloomFilter", "DynamicBloomFilter", "new_bloom_filter",
           "murmur_hash", "hash_positions", "hash_positions_all", "bit_size", "num_hashes",
           "SIMPLE", "DYNAMIC_V0", "DEFAULT_NUM_ENTRIES", "DEFAULT_FPP", "DEFAULT_MAX_ENTRIES",
           "DEFAULT_TYPE_CODE", "JENKINS_HASH", "MURMUR_HASH", "resume", "holds_as_is"]
