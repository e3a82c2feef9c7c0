"""Analysis: the paper's numbers from the aggregated tables, never from run folders.

`metrics` (spreads, seed statistics, |beta(t)|, clocks) -> `tables` (Tables 1-7, with
`rows` and `cells`), `figures` (Figures 1-9), `macros` (numbers of the prose),
`scorecard` (against the published numbers), `toy` (Appendix G's linear model). The
verdict engine: `claims` (each claim of paper/claims.yaml judged on runs) with `gates`
(its presuppositions), `inference` (its tests and intervals), `spread_gap` (spreads
compared), `magnitude` (size words against the paper's) and `claims_command` (initmem
claims); the study's design: `design` (what a config can judge, planned), `sequential`
(the staged rule: levels, decisions, futility) and `staged` (looks, their packs, cost,
simulation, replay); `status` (initmem status: a sweep while it trains). No torch.
"""
