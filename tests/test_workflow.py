"""The Snakefile: dry runs of the paper and demo configs, targets, guards, a real tiny run."""

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from workflow_helpers import (
    DEMO_CONFIG,
    PAPER_CONFIG,
    TEST_CONFIG,
    job_counts,
    snakemake,
    snakemake_command,
)

from initmem.plan import grid
from initmem.plan.architectures import ARCHS
from initmem.records.files import PROVENANCE_COLUMNS

ANALYSIS = {"write_config": 1, "aggregate_runs": 1, "render_table": 6,
            "render_settings_table": 1, "draw_figure": 8,
            "draw_toy_figure": 1, "write_macros": 1, "score_reproduction": 1,
            "write_paper_status": 1, "judge_claims": 1, "build_paper": 1, "all": 1}


def dry_run(tmp_path, config, *targets):
    done = snakemake(tmp_path, config, *targets, "-n", "--quiet", "rules")
    assert done.returncode == 0, done.stdout + done.stderr
    return job_counts(done.stdout)


def split(counts):
    """(number of training jobs, of spec-writing jobs, the other jobs' counts without the
    total)."""
    train = sum(n for rule, n in counts.items() if rule.startswith("train_"))
    rest = {r: n for r, n in counts.items()
            if not r.startswith("train_") and r not in ("total", "write_pack_specs")}
    return train, counts.get("write_pack_specs", 0), rest


@pytest.mark.slow
def test_dry_run_of_the_paper_config_has_a_job_per_pack(tmp_path):
    train, specs, rest = split(dry_run(tmp_path, PAPER_CONFIG, "all"))
    assert train == len(grid.make_packs(grid.load_config(PAPER_CONFIG))) == 351
    assert specs == 1
    assert rest == ANALYSIS


def test_dry_run_of_the_demo_config_builds_everything(tmp_path):
    train, specs, rest = split(dry_run(tmp_path, DEMO_CONFIG, "all"))
    # 75 packs (one per recipe), 6 to a job (execution.packs_per_job); one job writes
    # every spec (a Snakemake `run:` job is a fresh process: 4 s each)
    assert len(grid.make_packs(grid.load_config(DEMO_CONFIG))) == 75
    assert (train, specs) == (13, 1)
    assert rest == ANALYSIS


def test_one_figure_needs_only_the_aggregate(tmp_path):
    train, specs, rest = split(dry_run(tmp_path, DEMO_CONFIG, "results/figures/fig3.pdf"))
    assert (train, specs) == (13, 1)
    assert rest == {"write_config": 1, "aggregate_runs": 1, "draw_figure": 1}


def test_the_toy_figure_trains_nothing(tmp_path):
    assert dry_run(tmp_path, DEMO_CONFIG, "results/figures/fig9.pdf") == \
        {"draw_toy_figure": 1, "total": 1}


def test_tables_target_renders_the_seven_tables(tmp_path):
    *_, rest = split(dry_run(tmp_path, DEMO_CONFIG, "tables"))
    assert rest == {"write_config": 1, "aggregate_runs": 1, "render_table": 6,
                    "render_settings_table": 1, "tables": 1}


def test_asking_for_one_runs_file_trains_its_pack_only(tmp_path):
    config = grid.load_config(PAPER_CONFIG)
    pack_id, pack = list(grid.make_packs(config).items())[7]
    target = f"results/runs/{pack.runs[3].run_dir}/summary.parquet"
    assert dry_run(tmp_path, PAPER_CONFIG, target) == {f"train_{pack_id}": 1,
                                                       "write_pack_specs": 1, "total": 2}


def test_an_invalid_config_stops_with_the_readable_error(tmp_path):
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["families"]["main"]["recipe"]["arch"] = "resnet8"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    done = snakemake(tmp_path, path, "-n")
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "families.main.recipe.arch='resnet8' is not allowed" in out
    assert f"one of {', '.join(ARCHS)}" in out  # every declared network


@pytest.mark.skipif(torch.cuda.is_available(), reason="the guard is for machines without GPU")
def test_training_the_paper_grid_without_gpu_needs_confirmation(tmp_path):
    pack = next(iter(grid.make_packs(grid.load_config(PAPER_CONFIG)).values()))
    done = snakemake(tmp_path, PAPER_CONFIG, f"results/runs/{pack.runs[0].run_dir}/summary.parquet")
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "this machine has no GPU" in out and "GPU-hours" in out
    assert "--config confirm_cpu_full=True" in out
    assert not (tmp_path / "logs").exists()  # nothing started


@pytest.mark.slow
def test_tiny_synthetic_run_trains_and_aggregates(tmp_path):
    done = snakemake(tmp_path, TEST_CONFIG, "results/aggregate/runs.parquet")
    assert done.returncode == 0, done.stdout + done.stderr
    config = grid.load_config(TEST_CONFIG)
    runs = grid.expand_runs(config)
    for run in runs:  # records where the config says
        assert (tmp_path / "results" / "runs" / run.run_dir / "summary.parquet").exists()
    table = pd.read_parquet(tmp_path / "results" / "aggregate" / "runs.parquet")
    assert list(table["run_id"]) == [r.run_id for r in runs]
    assert (table["status"] == "completed").all() and (table["record_source"] == "trained").all()
    epochs = pd.read_parquet(tmp_path / "results" / "aggregate" / "epochs.parquet")
    assert len(epochs) == len(runs) * 1 and set(epochs["optimizer"]) == {"sgd", "adam"}

    again = snakemake(tmp_path, TEST_CONFIG, "results/aggregate/runs.parquet", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr

    # A run without a summary is unfinished: forcing the aggregate (Snakemake takes it as
    # up to date when an input disappears) trains that run alone (its pack's job, skipping
    # the finished runs, which it keeps) and aggregates again.
    pack_id, pack = next(iter(grid.make_packs(config).items()))
    lost = tmp_path / "results" / "runs" / pack.runs[1].run_dir
    kept = tmp_path / "results" / "runs" / pack.runs[0].run_dir / "summary.parquet"
    kept_bytes, kept_mtime = kept.read_bytes(), kept.stat().st_mtime_ns
    saved = pd.read_parquet(lost / "summary.parquet")
    shutil.rmtree(lost)  # as `initmem verify` advises for a damaged run
    force = ("--forcerun", "aggregate_runs")
    counts = dry_run(tmp_path, TEST_CONFIG, "results/aggregate/runs.parquet", *force)
    assert {r for r in counts if r.startswith("train_")} == {f"train_{pack_id}"}
    assert counts["aggregate_runs"] == 1
    done = snakemake(tmp_path, TEST_CONFIG, "results/aggregate/runs.parquet", *force)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "logs" / "train" / f"{pack_id}.log").read_text()
    assert f"{len(pack.runs) - 1} of the pack's {len(pack.runs)} runs already have " \
        "records: training the other 1" in log
    assert kept.read_bytes() == kept_bytes and kept.stat().st_mtime_ns == kept_mtime
    # Trained alone, not in its pack of 2: float32 reductions in another order, so equal
    # to rounding, not bitwise (kernel_fro_norm_init moved by 1e-7 relative here).
    pd.testing.assert_frame_equal(pd.read_parquet(lost / "summary.parquet")
                                  .drop(columns=list(PROVENANCE_COLUMNS)),
                                  saved.drop(columns=list(PROVENANCE_COLUMNS)), rtol=1e-5)

    edited = yaml.safe_load(TEST_CONFIG.read_text())
    edited["execution"].update(pack_size=1, device="auto")  # regroup, another device
    regrouped = tmp_path / "regrouped.yaml"
    regrouped.write_text(yaml.safe_dump(edited, sort_keys=False))
    again = snakemake(tmp_path, regrouped, "results/aggregate/runs.parquet", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr

    # Other seeds in the same packs (the same pack ids): their new specs train them.
    edited = yaml.safe_load(TEST_CONFIG.read_text())
    edited["seed_sets"]["one"] = [1]
    reseeded = tmp_path / "reseeded.yaml"
    reseeded.write_text(yaml.safe_dump(edited, sort_keys=False))
    done = snakemake(tmp_path, reseeded, "results/aggregate/runs.parquet")
    assert done.returncode == 0, done.stdout + done.stderr
    table = pd.read_parquet(tmp_path / "results" / "aggregate" / "runs.parquet")
    assert set(table["seed"]) == {1} and (table["status"] == "completed").all()


@pytest.mark.slow
def test_a_job_of_two_packs_trains_both(tmp_path):
    """execution.packs_per_job = 2: the test config's two packs train in one job, one
    process (its log names both), through a real run (so `onstart` sees that job)."""
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["execution"]["packs_per_job"] = 2
    path = tmp_path / "two_per_job.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    packs = grid.make_packs(grid.load_config(path))
    first = next(iter(packs))
    job = f"train_{first}-and-1-more"
    counts = dry_run(tmp_path, path, "results/aggregate/runs.parquet")
    assert {r: n for r, n in counts.items() if r.startswith("train_")} == {job: 1}
    done = snakemake(tmp_path, path, "results/aggregate/runs.parquet")
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "logs" / "train" / f"{job.removeprefix('train_')}.log").read_text()
    assert all(f"pack {pack.key} of 2 runs" in log for pack in packs.values())
    table = pd.read_parquet(tmp_path / "results" / "aggregate" / "runs.parquet")
    assert sorted(table["run_id"]) == sorted(r.run_id for p in packs.values() for r in p.runs)

    # A job keeps its name and its specs when some of its packs are finished (a SLURM
    # job's own Snakemake parses the workflow again while other jobs finish): initmem
    # train skips a finished pack in one line; its outputs are the unfinished runs only.
    second = list(packs.values())[1]
    shutil.rmtree(tmp_path / "results" / "runs" / second.runs[0].run_dir)
    done = snakemake(tmp_path, path, "results/aggregate/runs.parquet", "-n", "-p",
                     "--forcerun", "aggregate_runs")
    assert done.returncode == 0, done.stdout + done.stderr
    assert job_counts(done.stdout)[job] == 1
    (command,) = [line for line in done.stdout.splitlines() if " -m initmem train " in line]
    assert all(f"results/packs/{grid.spec_name(*item)}" in command for item in packs.items())
    assert "output: " + str(Path("results/runs") / second.runs[0].run_dir / "summary.parquet") \
        in done.stdout


def test_a_config_edit_that_changes_a_packs_runs_trains_its_new_spec(tmp_path):
    """Seeds [0] -> [1]: each pack keeps its id but holds other runs. Its spec is another
    file (named by its content key too), so the specs are written again and each job reads
    the new one; named by the id alone, the old spec stayed, trained its finished runs and
    the job failed with its outputs missing."""
    target = "results/aggregate/runs.parquet"
    before = grid.make_packs(grid.load_config(TEST_CONFIG))
    specs = [f"results/packs/{grid.spec_name(*item)}" for item in before.items()]
    done = snakemake(tmp_path, TEST_CONFIG, *specs)
    assert done.returncode == 0, done.stdout + done.stderr
    edited = yaml.safe_load(TEST_CONFIG.read_text())
    edited["seed_sets"]["one"] = [1]
    path = tmp_path / "seed_1.yaml"
    path.write_text(yaml.safe_dump(edited, sort_keys=False))
    packs = grid.make_packs(grid.load_config(path))
    assert list(packs) == list(before)  # the same ids
    done = snakemake(tmp_path, path, target, "-n", "-p")
    assert done.returncode == 0, done.stdout + done.stderr
    assert job_counts(done.stdout)["write_pack_specs"] == 1
    commands = [line for line in done.stdout.splitlines() if " -m initmem train " in line]
    named = [spec for spec in (f"results/packs/{grid.spec_name(*item)}" for item in
                               packs.items()) for line in commands if spec in line]
    assert sorted(named) == sorted(set(named)) and len(named) == len(packs)
    assert not any(spec in line for spec in specs for line in commands)


@pytest.mark.slow
def test_every_pack_spec_is_written_before_training_starts(tmp_path):
    """On one core, the second pack's spec is written before the first pack trains, so
    training jobs are all ready and taken longest first (issue 26: a 35-minute pack
    started last because its spec waited for a free core)."""
    cmd = [*snakemake_command(tmp_path, TEST_CONFIG, "results/aggregate/runs.parquet",
                              profile="default")]
    cmd[cmd.index("--cores") + 1] = "1"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    started = [line.split()[-1].rstrip(":") for line in (done.stdout + done.stderr).splitlines()
               if line.startswith(("rule ", "localrule "))]
    specs = [i for i, rule in enumerate(started) if rule == "write_pack_specs"]
    trains = [i for i, rule in enumerate(started) if rule.startswith("train_")]
    assert len(specs) == 1 and len(trains) == 2, started
    assert max(specs) < min(trains), started


@pytest.mark.slow
def test_missing_cifar10_says_how_to_get_it(tmp_path):
    run = grid.expand_runs(grid.load_config(DEMO_CONFIG))[0]
    done = snakemake(tmp_path, DEMO_CONFIG, f"results/runs/{run.run_dir}/summary.parquet")
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "CIFAR-10 not found: data/cifar10/cifar-10-batches-py does not exist" in out
    assert "synthetic" in out and "data.root" in out


def test_table1_needs_no_training(tmp_path):
    assert dry_run(tmp_path, DEMO_CONFIG, "results/tables/table1.tex") == \
        {"write_config": 1, "render_settings_table": 1, "total": 1 + 1}


def test_strict_switch_makes_partial_tables_an_error(tmp_path):
    done = snakemake(tmp_path, DEMO_CONFIG, "results/tables/table2.tex", "-n", "-p",
                     "--config", "strict=True")  # Snakemake parses Python literals
    assert done.returncode == 0, done.stderr
    assert "--strict" in done.stdout


@pytest.mark.parametrize(("key", "value", "flags"), [
    ("compaction", True, []), ("compaction", False, ["--no-compaction"]),
    ("tensorboard", "results/tensorboard", ["--tensorboard results/tensorboard"])])
def test_execution_switches_reach_the_training_jobs(tmp_path, key, value, flags):
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["execution"][key] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    pack = next(iter(grid.make_packs(grid.load_config(path)).values()))
    target = f"results/runs/{pack.runs[0].run_dir}/summary.parquet"
    done = snakemake(tmp_path, path, target, "-n", "-p")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "-m initmem train " in done.stdout, done.stdout
    train = next(line for line in done.stdout.splitlines() if "-m initmem train " in line)
    switches = ["--no-compaction", "--tensorboard"]
    assert [s for s in switches if s in train] == [f.split()[0] for f in flags]
    assert all(f in train for f in flags)
