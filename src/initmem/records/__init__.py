"""Records: what training leaves behind, and the tables every analysis reads.

`files` (the per-run history and summary format, sealed with checksums) -> `aggregate`
(runs.parquet, epochs.parquet of a config's expected runs) and `archive` (every record in
one file, with the `environment` it was packed in); `verify` says which runs' records are
good, missing, damaged or stale; `tensorboard` writes records as event files; `synthetic`
generates plausible fake records for tests and demos. Watching a sweep while it trains:
`heartbeat` (a trainer's pulse and its pack lock), `cluster` (one SLURM snapshot) and
`status` (initmem status: runs by state, trainers, device-hours, ETA, a staged study's
looks).
"""
