"""Plan: what to train. The config, its runs and packs, and what they cost.

config.yaml -> `config` (schema and semantic checks) -> `grid` (runs, packs) -> `spec`
(Recipe, Run, Pack: the unit every later stage is keyed by); `cost` projects device-hours
and the training jobs' time limits. Imports nothing of training, so the workflow plans
without torch.
"""
