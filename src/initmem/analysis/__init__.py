"""Analysis: the paper's numbers from the aggregated tables, never from run folders.

`metrics` (spreads, seed statistics, |beta(t)|, clocks) -> `tables` (Tables 1-7, with
`rows` and `cells`), `figures` (Figures 1-9), `macros` (numbers of the prose),
`scorecard` (against the published numbers). No torch.
"""
