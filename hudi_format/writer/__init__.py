"""Writing: operations, tagging (index), file sizing, write handles and the commit protocol."""
