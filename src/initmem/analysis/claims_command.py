"""`initmem claims`: judge the paper's claims on runs tables or archives, or plan which
claims a config can judge before it is trained (`--plan`). The engine is
initmem.analysis.claims, the plan initmem.analysis.design."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from initmem import checkout
from initmem.analysis import design, staged
from initmem.analysis.claims import VERDICTS, Source, read_claims, render_markdown, write_claims
from initmem.analysis.scorecard import tally
from initmem.errors import InputError
from initmem.plan import cost, looks
from initmem.plan.cells import recipe_keys
from initmem.plan.grid import load_config
from initmem.records.aggregate import tables_from_archive, tables_from_records
from initmem.vocabulary import MISSING


def epoch_columns() -> list[str]:
    """What the claims read of the epochs table (|beta(t)| and its evaluation gate)."""
    return list(dict.fromkeys([*recipe_keys(), "run_id", "epoch", "sigma_w", "seed",
                               "val_acc"]))


def read_sources(args: argparse.Namespace) -> list[Source]:
    """The runs tables to judge: aggregated tables (--runs, with --epochs), then archives
    of --config aggregated here (--archive); --label names them in that order."""
    epochs = args.epochs or [None] * len(args.runs)
    if len(epochs) != len(args.runs):
        raise InputError(f"--epochs was given {len(epochs)} times for {len(args.runs)} "
                         "--runs: give one per runs table, in the same order")
    pairs = [(pd.read_parquet(r), None if e is None else
              pd.read_parquet(e, columns=epoch_columns()))
             for r, e in zip(args.runs, epochs, strict=True)]
    if args.archive:
        pairs += [tables_from_archive(args.config, a) for a in args.archive]
    names = [*map(str, args.runs), *map(str, args.archive)]
    labels = args.label or []
    if len(labels) > len(names):
        raise InputError(f"{len(labels)} --label for {len(names)} runs tables and archives")
    names[:len(labels)] = labels
    return [Source(name, runs, history) for name, (runs, history) in zip(names, pairs,
                                                                           strict=True)]


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem claims`."""
    parser.add_argument("--runs", action="append", default=[],
                        help="results/aggregate/runs.parquet (repeat for several studies)")
    parser.add_argument("--epochs", action="append",
                        help="results/aggregate/epochs.parquet (|beta(t)|), one per --runs")
    parser.add_argument("--archive", action="append", type=Path, default=[],
                        help="a runs archive of --config (repeat: reruns of one config)")
    parser.add_argument("--config", type=Path, help="the config the archives were made from")
    parser.add_argument("--label", action="append",
                        help="a name per runs table, then per archive (robustness column)")
    parser.add_argument("--claims", type=Path, default=checkout.CLAIMS,
                        help="the claims file (default paper/claims.yaml of initmem's "
                             "checkout)")
    parser.add_argument("--plan", action="store_true",
                        help="before training: what --config can judge, per claim (its "
                             "cells, clocks, BatchNorm updates, seeds against the power "
                             "needed, device-hours); writes --out-csv and --out-md, or "
                             "prints the table")
    parser.add_argument("--noise-from", type=Path,
                        help="--plan: a runs table or archive whose cells give the seed noise "
                             "to plan with (its own config)")
    parser.add_argument("--noise-sd", type=float, default=2.0,
                        help="--plan: the seed noise (pp) where --noise-from has no "
                             "multi-seed cell like the claim's (default %(default)s)")
    parser.add_argument("--reference", type=Path, default=checkout.CONFIG,
                        help="--plan: the paper's config, whose cells stand in, at --config's "
                             "scale, for those --config leaves out (default %(default)s, "
                             "where it exists)")
    parser.add_argument("--staged", action="store_true",
                        help="replay the runs tables or archives look by look as the staged "
                             "design of --config would have judged them (initmem.analysis."
                             "staged); writes --out-csv")
    parser.add_argument("--look", type=int,
                        help="in a staged study (config `staged`): judge look LOOK (1-based) "
                             "on the run folders under --records and write its decisions to "
                             "--out-csv (the workflow's look checkpoints)")
    parser.add_argument("--records", type=Path, default=checkout.RESULTS / "runs",
                        help="--look: the run folders root (default %(default)s)")
    parser.add_argument("--previous", type=Path,
                        help="--look: the previous look's decisions (its --out-csv)")
    parser.add_argument("--asked", type=Path, metavar="DECISIONS",
                        help="in a staged study: from its last look's decisions (a --look "
                             "--out-csv), write the ids of the runs its looks asked for to "
                             "--out-runs, one a line (the aggregate's expected runs)")
    parser.add_argument("--out-runs", type=Path, help="--asked: the run ids' file")
    parser.add_argument("--draws", type=int, default=20,
                        help="--plan: simulated studies behind the staged design's expected "
                             "device-hours per look (0: leave the staged design out; "
                             "default %(default)s)")
    parser.add_argument("--out-csv", help="one row per claim (claims.csv); without --out-csv, "
                        "--out-tex, --out-md or --out-values the claims (or --plan's) table "
                        "is printed to the terminal")
    parser.add_argument("--out-tex", help="the claims table (claims.tex)")
    parser.add_argument("--out-md", help="also as a Markdown table (for a README)")
    parser.add_argument("--out-values", help="every value with its 95%% interval (CSV)")


def main(args: argparse.Namespace) -> int:
    """`initmem claims`: judge, plan, replay or decide a look, as its flags ask."""
    if args.plan:
        return plan(args)
    if (args.staged or args.look is not None) and args.out_csv is None:
        raise InputError(f"--{'staged' if args.staged else 'look'} needs --out-csv (one row "
                         "per claim)")
    if args.staged:
        return replay(args)
    if args.asked is not None:
        return write_asked(args)
    if args.look is not None:
        return judge_look(args)
    if not args.runs and not args.archive:
        raise InputError("nothing to judge: give --runs (aggregated runs tables) or "
                         "--archive with --config")
    if args.archive and args.config is None:
        raise InputError("--archive needs --config, the config the archives were made from")
    table = write_claims(read_sources(args), args.claims, args.out_csv, args.out_tex,
                         args.out_md, args.out_values)
    if not any((args.out_csv, args.out_tex, args.out_md, args.out_values)):
        print(render_markdown(table))  # nothing to write: the table on the screen
    print(tally(table["verdict"], VERDICTS, "claims"))
    return 0


def replay(args: argparse.Namespace) -> int:
    """`--staged`: each source judged look by look as --config's staged study would."""
    if args.config is None:
        raise InputError("--staged needs --config, the config whose looks to replay")
    staging = looks.Staging.of(load_config(args.config), read_claims(args.claims))
    tables = []
    for source in read_sources(args):
        table, used = staged.replay(staging, source.runs, source.epochs)
        recorded = int(source.runs["status"].ne(MISSING).sum())
        print(f"{source.label}:\n{staged.render_replay(table, used, recorded)}")
        tables.append(table.assign(source=source.label))
    Path(args.out_csv).parent.mkdir(parents=True, exist_ok=True)
    pd.concat(tables).to_csv(args.out_csv, index=False)
    return 0


def judge_look(args: argparse.Namespace) -> int:
    """`--look`: a running staged study's decisions after one look."""
    if args.config is None:
        raise InputError("--look needs --config, the staged study's config")
    if not 1 <= args.look <= len(looks.LOOKS):
        raise InputError(f"--look {args.look}: the looks are 1 to {len(looks.LOOKS)}")
    if (args.look > 1) != (args.previous is not None):
        raise InputError(f"--look {args.look}: --previous (the decisions of look "
                         f"{args.look - 1}) is needed from look 2 on, and only there")
    config = load_config(args.config)
    runs, epochs = tables_from_records(config, args.records)
    previous = None if args.previous is None else looks.read_decisions(args.previous)
    staging = looks.Staging.of(config, read_claims(args.claims))
    table = staged.judge_look(staging, args.look - 1, runs, epochs, previous)
    Path(args.out_csv).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out_csv, index=False)
    print(tally(table["decision"], looks.DECISIONS, f"claims after look {args.look}"))
    return 0


def write_asked(args: argparse.Namespace) -> int:
    """`--asked`: the runs a staged study's looks asked for, after its last decisions."""
    if args.config is None or args.out_runs is None:
        raise InputError("--asked needs --config (the staged study's) and --out-runs")
    staging = looks.Staging.of(load_config(args.config), read_claims(args.claims))
    ids = sorted(staging.asked(looks.read_decisions(args.asked)))
    Path(args.out_runs).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out_runs).write_text("".join(f"{run_id}\n" for run_id in ids))
    print(f"{len(ids)} of the config's {len(staging.runs)} runs asked for by its looks")
    return 0


def plan(args: argparse.Namespace) -> int:
    """`--plan`: the design a config gives each claim, before anything is trained."""
    if args.config is None:
        raise InputError("--plan needs --config, the config to plan")
    config = load_config(args.config)
    noise = None
    if args.noise_from is not None:
        noise = (tables_from_archive(None, args.noise_from)[0]
                 if args.noise_from.suffix == ".tar" else pd.read_parquet(args.noise_from))
    reference = load_config(args.reference) if args.reference.exists() else None
    claims = read_claims(args.claims)
    table = design.plan_table(claims, config, noise, args.noise_sd, reference)
    markdown = design.render_markdown(table, cost.throughput(config["execution"]).device)
    if args.out_csv:
        Path(args.out_csv).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out_csv, index=False)
    if args.out_md:
        Path(args.out_md).write_text(markdown)
    if not (args.out_csv or args.out_md):  # asked for on the terminal: shown there
        print(markdown)
    counts = [f"{int(table['plan'].str.startswith(o).sum())} {o}" for o in design.OUTCOMES]
    print(f"{args.config}, of {len(table)} claims: {', '.join(counts)}; the others out of "
          "regime or not in the config")
    if args.draws > 0:
        staging = looks.Staging.of(config, claims)
        print(staged.render_looks(staging, staged.simulate(staging, 1.0, args.draws)))
    return 0
