"""The metadata table (``.hoodie/metadata``): a MOR Hudi table of HFiles that indexes the data
table. :mod:`.keys` holds the key encodings and file-group mapping of every partition."""
