"""The training benchmark's bookkeeping: peak table, FLOP rates, timing order, CSV round trip.

No timings are checked (speed is what bench/ prints); these tests check what the numbers
are made of.
"""

import csv
import os
import random
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from initmem.plan import cost, looks
from initmem.plan.grid import load_config
from initmem.training.models import train_flops_per_image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_training  # noqa: E402
import byteflip  # noqa: E402
import equivalence  # noqa: E402
import fresh_demo  # noqa: E402
import idle_cores  # noqa: E402
import quiet  # noqa: E402
import staged_design  # noqa: E402


@pytest.mark.parametrize(("name", "tf32", "peak"), [
    ("NVIDIA H100 80GB HBM3", True, 494.5), ("NVIDIA H100 80GB HBM3", False, 67.0),
    ("NVIDIA H200", True, 494.5), ("NVIDIA H200 NVL", True, 417.5),
    ("NVIDIA H100 PCIe", True, 378.0), ("NVIDIA A100-SXM4-80GB", True, 156.0),
    ("NVIDIA A10", True, 62.5), ("NVIDIA L4", True, 60.0), ("NVIDIA L40S", True, 183.0),
    ("Tesla V100-SXM2-16GB", True, 15.7), ("Some Future GPU", True, None),
])
def test_peak_lookup_prefers_specific_names(name, tf32, peak):
    assert bench_training.peak_tflops(name, tf32) == peak


def test_flop_rates_and_peak_fraction():
    row = {"arch": "resnet9", "width": 1.0, "packed_images_per_s": 50_000.0,
           "sequential_images_per_s": 10_000.0}
    env = {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3",
           "precision": "float32 (TF32 allowed)"}
    bench_training.add_flops(row, env)
    flops = train_flops_per_image("resnet9", 1.0)  # 2.2756e9 per image
    assert row["train_gflop_per_image"] == pytest.approx(flops / 1e9)
    assert row["packed_tflops"] == pytest.approx(flops * 50_000 / 1e12)  # 113.8 TFLOP/s
    assert row["packed_peak_fraction"] == pytest.approx(flops * 50_000 / 1e12 / 494.5)
    assert row["sequential_peak_fraction"] == pytest.approx(flops * 10_000 / 1e12 / 494.5)
    cpu = bench_training.add_flops(dict(row), {**env, "device": "cpu", "precision": "float32"})
    assert cpu["peak_tflops"] is None and cpu["packed_peak_fraction"] is None


def test_modes_alternate_block_by_block():
    calls = []
    fns = [lambda: calls.append("packed"), lambda: calls.append("sequential")]
    times = bench_training.median_seconds(fns, bench_training.torch.device("cpu"), warmup=2,
                                          repeats=3, block=2)
    assert len(times) == 2
    assert calls == ["packed"] * 2 + ["sequential"] * 2 + (
        ["packed"] * 2 + ["sequential"] * 2) * 3


def test_csv_feeds_the_cost_model(tmp_path, capsys):
    out = tmp_path / "training.csv"
    rows = bench_training.main(["--device", "cpu", "--widths", "0.03125", "--packs", "1", "2",
                                "--cases", "resnet9:4", "resnet9:8", "--repeats", "1",
                                "--out", str(out)])
    # One row per case, N and path; on CPU the paths are eager and eager_cl.
    assert [(r["b"], r["N"], r["path"]) for r in rows] == [
        (b, n, path) for b in (4, 8) for n in (1, 2) for path in ("eager", "eager_cl")]
    with open(out, newline="") as fh:
        written = list(csv.DictReader(fh))
    assert len(written) == 8
    # a path's rows share the eager sequential time they were timed beside
    assert written[0]["sequential_s_per_step"] == written[1]["sequential_s_per_step"]
    for key in ("device_name", "precision", "torch", "numpy", "python", "threads",
                "train_gflop_per_image", "packed_tflops"):
        assert written[0][key] != "", key
    assert written[0]["device"] == "cpu" and written[0]["peak_tflops"] == ""
    assert "packing slower than sequential at:" in capsys.readouterr().out
    measured = cost.Throughput.from_csv(out)
    assert measured.device == written[0]["device_name"]
    assert measured.step_seconds("resnet9", 8, 2, 0.03125) > 0


def test_a_case_out_of_device_memory_is_skipped_and_said(tmp_path, monkeypatch, capsys):
    real = bench_training.measure

    def measure(arch, b, n, *args):
        if n > 1:
            raise bench_training.torch.cuda.OutOfMemoryError("CUDA out of memory")
        return real(arch, b, n, *args)

    monkeypatch.setattr(bench_training, "measure", measure)
    monkeypatch.setattr(bench_training.torch.cuda, "empty_cache", lambda: None)
    rows = bench_training.main(["--device", "cpu", "--widths", "0.03125", "--packs", "1", "2",
                                "--cases", "resnet9:4", "--paths", "eager", "--repeats", "1",
                                "--out", str(tmp_path / "t.csv")])
    assert [r["N"] for r in rows] == [1]
    assert "resnet9 b=4 N=2 width=0.03125: out of device memory" in capsys.readouterr().err


def test_graph_paths_need_a_gpu(capsys):
    with pytest.raises(SystemExit):
        bench_training.main(["--device", "cpu", "--paths", "eager", "graph"])
    assert "paths eager, graph are not allowed on cpu" in capsys.readouterr().err


def test_target_lines_say_met_or_not():
    row = {"arch": "resnet9", "b": 16, "N": 25, "width": 1.0, "path": "graph_cl",
           "packed_over_sequential": 9.5, "target": 8.0}
    assert bench_training.target_line(row).endswith("9.50x one eager single run's "
                                                    "images/s (target 8x: met)")
    assert bench_training.target_line({**row, "packed_over_sequential": 2.0}).endswith(
        "(target 8x: NOT met)")


def test_bad_case_is_named(capsys):
    with pytest.raises(SystemExit):
        bench_training.main(["--cases", "resnet9-16"])
    assert "case 'resnet9-16' is not allowed; write ARCH:B" in capsys.readouterr().err


def test_others_share_by_hand(monkeypatch):
    # The machine used 3 CPU seconds during 1 s of wall time on 4 cores, this process 1:
    # others used 2 of 4 core-seconds.
    machine, own, clock = iter([10.0, 13.0]), iter([1.0, 2.0]), iter([5.0, 6.0])
    monkeypatch.setattr(quiet, "machine_cpu_s", lambda: next(machine))
    monkeypatch.setattr(quiet, "own_cpu_s", lambda: next(own))
    monkeypatch.setattr(quiet.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(quiet.os, "cpu_count", lambda: 4)
    assert quiet.others_share(lambda: "result") == ("result", 0.5)


def test_share_unknown_without_proc_stat(monkeypatch):
    monkeypatch.setattr(quiet, "machine_cpu_s", lambda: None)
    assert quiet.others_share(lambda: 7) == (7, None)
    quiet.wait_until_quiet(poll_s=0.0)  # unknown share: returns at once


@pytest.mark.slow
def test_equivalence_script_runs_and_judges(capsys):
    """On CPU: packed and channels_last against runs alone, in float64 and float32."""
    assert equivalence.main(["--quick", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "equivalence: ok" in out
    assert out.count("alone") == 4  # packed and packed_cl, two dtypes


def test_equivalence_failures_name_the_way():
    def row(dtype, way, against, largest):
        return {"dtype": dtype, "way": way, "against": against, "weights_rel": largest,
                "losses_rel": 0.0, "acc_abs": 0.0}

    rows = [row("float64", "packed", "alone", 1e-12), row("float32", "packed", "alone", 0.1),
            row("float64", "packed_cl", "alone", 1e-6),
            row("float32", "packed_graph", "packed", 1e-9),
            row("float32", "packed_graph_cl", "packed_cl", 0.0)]
    assert equivalence.failures(rows) == [
        "packed_cl vs alone (float64): above 1e-08 in float64",
        "packed_graph vs packed (float32): a CUDA graph must reproduce its eager pack bitwise"]


def test_byteflip_sweep_counts_every_flip_and_restores_the_file(tmp_path):
    rng = random.Random(0)
    for kind, path in byteflip.targets(tmp_path).values():
        before = path.read_bytes()
        counts = byteflip.sweep(kind, path, 20, rng)
        assert sum(counts.values()) == 20 and counts["caught"] + counts["harmless"] == 20
        assert path.read_bytes() == before


# (time, what, rule, jobid, threads): a job's block opens with "localrule" or "rule"
SNAKEMAKE_EVENTS = [("00:00", "localrule", "write_pack_specs", 4, 1),
                    ("00:00", "Finished", "write_pack_specs", 4, 1),
                    ("00:00", "localrule", "train_a", 3, 1), ("00:00", "rule", "train_b", 5, 2),
                    ("00:30", "Finished", "train_a", 3, 1), ("01:00", "Finished", "train_b", 5, 2),
                    ("01:00", "localrule", "train_c", 6, 1),
                    ("02:00", "localrule", "archive", 0, 1)]


def snakemake_log(events: list[tuple]) -> list[str]:
    """Snakemake 9's log lines for these job starts and ends."""
    lines = ["Provided cores: 2"]
    for time, what, rule, jobid, threads in events:
        lines.append(f"[Thu Dec  3 10:{time} 2026]")
        if what == "Finished":
            lines.append(f"Finished jobid: {jobid} (Rule: {rule})")
        else:
            lines += [f"{what} {rule}:", f"    jobid: {jobid}"]
            lines += [f"    threads: {threads}"] if threads > 1 else []
    return lines


def test_idle_cores_from_a_snakemake_log():
    """a (1 thread, 30 s) and b (2 threads, 60 s) overlap on 2 cores: busy, capped, 2 cores
    for 60 s; then c runs alone until the log is cut at 10:02: one core idle for 60 s."""
    cores, jobs, last = idle_cores.training_jobs(snakemake_log(SNAKEMAKE_EVENTS))
    assert cores == 2 and [j.threads for j in jobs] == [1, 2, 1]
    assert idle_cores.idle(cores, jobs, last) == (120.0, 180.0, 60.0)


def test_fresh_demo_phases_from_the_files_each_one_leaves(tmp_path):
    """Each phase ends at its marker's mtime: venv 30 s, data 10 s, workflow 200 s from a
    start at t = 1000; and the training's idle share from the demo's own Snakemake log."""
    for (_, marker), end in zip(fresh_demo.PHASES, (1030, 1040, 1240), strict=True):
        (tmp_path / marker).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / marker).touch()
        os.utime(tmp_path / marker, (end, end))
    lines = fresh_demo.phase_lines(tmp_path, 1000.0)
    assert [line.split()[-2] for line in lines[:3]] == ["30", "10", "200"]
    assert "240 s (4.0 min, within the 5-minute target)" in lines[3]
    log = tmp_path / ".snakemake" / "log" / "2026-12-03T100000.snakemake.log"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(snakemake_log(SNAKEMAKE_EVENTS)))
    assert fresh_demo.idle_line(tmp_path) == \
        "  training: 3 jobs on 2 cores, 120 s wall, cores idle 25.0% of it"


def test_staged_design_targets_say_met_or_not():
    table = pd.DataFrame({"scale": [1.0, 0.0], "false_hold": [float("nan"), 0.04],
                          "false_fail": [0.0, 0.08], "expected_h": [150.0, 200.0],
                          "max_h": [280.0, 280.0], "fixed_h": [274.0, 274.0],
                          "power": [0.62, float("nan")], "fixed_power": [0.66, float("nan")]})
    assert staged_design.targets(table) == [
        "false hold rate at most 5% at every scale: met (worst 4.0%)",
        "false fail rate at most 5% at every scale: NOT met (worst 8.0%)",
        "true claims held at the paper's effects: 62.0% staged, 66.0% by the fixed design on "
        "the same studies",
        "expected GPU-hours at most 60% of the fixed design's at the paper's effects: met (55%)",
        "max GPU-hours at most 110% of the fixed design's at the paper's effects: met (102%)"]


def test_the_futility_oracle_costs_between_the_first_look_and_every_look():
    """The SGD b = 16 delta claim of config/gpu_first.yaml at the paper's 10 pp: the oracle
    stops it where the fixed design's 5% test first holds it, never after the last look."""
    claim = {"id": "remembers", "cells": {"sgd": {"family": "main", "optimizer": "sgd",
                                                  "b": 16}},
             "values": {"delta": {"stat": "delta", "cell": "sgd"}},
             "holds": ["delta >> 0"], "paper": {"delta": 10.0}}
    staging = looks.Staging.of(load_config(ROOT / "config" / "gpu_first.yaml"), [claim])
    most = staging.max_hours()
    hours = staged_design.oracle_hours(staging, 4)
    assert ((hours >= most[0] - 1e-9) & (hours <= sum(most) + 1e-9)).all()
    cells = staging.claims[0]
    large = {"delta": np.full(15, 10.0) + np.random.default_rng(0).standard_normal(15)}
    assert staged_design.oracle_look(cells, large) == 0
