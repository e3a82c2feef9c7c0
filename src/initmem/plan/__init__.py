"""Plan: what to train. The config, its runs and packs, and what they cost.

config.yaml -> `inputs` (strict YAML/JSON reading) and `schema` (the config's JSON
schema, with errors naming the key) -> `grid` (runs, packs) -> `spec` (Recipe, Run, Pack:
the unit every later stage is keyed by); `cost` projects device-hours and the training
jobs' time limits, `memory` bounds a run's memory before anything trains. The facts each
recipe reads, declared once: `architectures` (with `bodies`, one module per network
family), `optimizers`, `schedule` (the learning rate and the forgetting clocks in closed
form). `results` says which config's outputs results/ holds, `slurm_profile` installs the
named profile. Imports nothing of training, so the workflow plans without torch.
"""
