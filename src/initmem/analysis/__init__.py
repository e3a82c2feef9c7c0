"""Analysis: the paper's numbers from the aggregated tables, never from run folders.

The paper's numbers: `metrics` (spreads, seed statistics, |beta(t)|, clocks) -> `tables`
(Tables 1-7, with `rows` and `cells`), `figures` (Figures 1-9), `macros` (numbers of the
prose), `scorecard` (against the published numbers), `toy` (Appendix G's linear model).
The verdict engine: `claims` (each claim of paper/claims.yaml judged on runs) with
`gates` (its presuppositions), `inference` (its tests and intervals), `spread_gap`
(spreads compared), `magnitude` (size words against the paper's), `sequential` (the
staged rule: levels, decisions, futility), `design` (what a config can judge, planned),
`staged` (a staged design simulated, replayed and judged look by look) and
`claims_command` (initmem claims). Which runs a look trains is planning
(initmem.plan.looks); watching a sweep is records' (initmem.records.status). No torch.
"""
