"""Query planning (snapshot, time travel, read-optimized, incremental), pruning and merging."""
