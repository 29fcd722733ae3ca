"""Bar construction: one instrument's MBP-10 records in, one row per bar out."""
