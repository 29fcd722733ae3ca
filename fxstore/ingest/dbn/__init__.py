"""Reading Databento DBN: the format, files (plain and zstd), symbology, ts_recv merge."""
