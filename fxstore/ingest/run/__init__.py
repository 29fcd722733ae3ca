"""Orchestration of `fxstore ingest` and `fxstore scan`: groups of files, workers, day files,
the manifest and resumable progress."""
