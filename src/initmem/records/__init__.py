"""Records: what training leaves behind, and the tables every analysis reads.

`files` (the per-run history and summary format, sealed with checksums) -> `aggregate`
(runs.parquet, epochs.parquet of a config's expected runs) and `archive` (every record in
one file); `synthetic` generates plausible fake records for tests and demos.
"""
