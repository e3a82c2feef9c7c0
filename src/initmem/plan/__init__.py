"""Plan: what to train. The config, its runs and packs, the study's design, and cost.

config.yaml -> `inputs` (strict YAML/JSON reading) and `schema` (the config's JSON
schema, with errors naming the key) -> `grid` (runs, packs) -> `spec` (Recipe, Run, Pack:
the unit every later stage is keyed by, and a run's spec columns). The study's design:
`claims_file` (paper/claims.yaml, what the study sets out to judge), `cells` (the planned
runs as a table, and the cells a claim reads from any runs table) and `looks` (a staged
study: which runs each look trains, read from the looks' decisions). `cost` projects
device-hours and the training jobs' time limits, `memory` bounds a run's memory before
anything trains. The facts each recipe reads, declared once: `architectures` (with
`bodies`, one module per network family), `optimizers`, `schedule` (the learning rate and
the forgetting clocks in closed form). `results` says which config's outputs results/
holds, `slurm_profile` installs the named profile. Imports nothing of the later stages,
so the workflow plans without torch, records or analysis.
"""
