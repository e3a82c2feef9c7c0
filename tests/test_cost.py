"""Cost model: the built-in estimate, the measured model's rules, FLOP counting, the CLI.

Every expected number is worked out by hand in the comments.
"""

import csv
from pathlib import Path

import pandas as pd
import pytest
import yaml

from initmem import cli
from initmem.errors import InputError
from initmem.plan import cost, grid
from initmem.plan.architectures import ARCHS
from initmem.plan.spec import Pack, Recipe, Run
from initmem.training.models import build_model, train_flops_per_image

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ("device_name", "arch", "b", "N", "width", "packed_s_per_step",
          "sequential_s_per_step")


def make_pack(n: int, arch: str = "resnet9", **recipe) -> Pack:
    fields = {"family": "main", "arch": arch, "optimizer": "sgd", "b": 100, "epochs": 2,
              "width": 0.5, "train_subset": 1000, "eval_subset": 50, **recipe}
    r = Recipe(**fields)
    return Pack(r, tuple(Run(r, 1.0, seed) for seed in range(n)))


def write_bench(path: Path, rows: list[tuple], fields: tuple = FIELDS) -> Path:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(fields)
        writer.writerows(rows)
    return path


def write_config(path: Path, **execution) -> Path:
    """config/test.yaml with execution keys replaced."""
    config = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    config["execution"].update(execution)
    path.write_text(yaml.safe_dump(config))
    return path


# One device; ResNet-9 at width 1: N=1 at b=16 (10 ms) and b=128 (24 ms), N=5 at b=128
# (packed 80 ms; sequential 120 ms = 5 x 24 ms, one more N=1, b=128 point).
# ResNet-56 at width 1: N=1, b=128 only (100 ms).
ROWS = [("gpu-x", "resnet9", 16, 1, 1.0, 0.010, 0.010),
        ("gpu-x", "resnet9", 128, 1, 1.0, 0.024, 0.024),
        ("gpu-x", "resnet9", 128, 5, 1.0, 0.080, 0.120),
        ("gpu-x", "resnet56", 128, 1, 1.0, 0.100, 0.100)]
# Rule 2: slope (0.024 - 0.010) / (128 - 16) = 1.25e-4 s/image, intercept
# 0.010 - 16 x 1.25e-4 = 0.008 s; ResNet-56 has one b: 0.008 x 58 / 9 (LAYERS).
R9_OVERHEAD = 0.008
R56_OVERHEAD = 0.008 * 58 / 9


# The same points with a path column: ROWS as eager, and CUDA-graph rows of ResNet-9 whose
# sequential_s_per_step repeats the eager singles (as bench_training.py writes them).
PATH_ROWS = [(*r, "eager") for r in ROWS] + [
    ("gpu-x", "resnet9", 16, 1, 1.0, 0.004, 0.010, "graph"),
    ("gpu-x", "resnet9", 128, 1, 1.0, 0.024, 0.024, "graph"),
    ("gpu-x", "resnet9", 128, 5, 1.0, 0.060, 0.120, "graph")]


@pytest.fixture()
def measured(tmp_path) -> cost.Throughput:
    return cost.Throughput.from_csv(write_bench(tmp_path / "bench.csv", ROWS))


@pytest.fixture()
def path_bench(tmp_path) -> Path:
    return write_bench(tmp_path / "paths.csv", PATH_ROWS, (*FIELDS, "path"))


def test_builtin_pack_seconds_by_hand():
    # 1000 images / b=100: 10 steps per epoch. Per image 6e-5 x 0.5^2 = 1.5e-5 s.
    # Step of 4 runs: 3e-3 + 4 x 100 x 1.5e-5 = 9e-3 s. Evaluation: 2 x 50 images per run,
    # 4 runs, at 1.5e-5 / 3 = 5e-6 s: 2e-3 s. Epoch: 10 x 9e-3 + 2e-3 = 0.092 s; 2 epochs.
    assert cost.pack_seconds(make_pack(4)) == pytest.approx(0.184)
    assert cost.gpu_hours([make_pack(4)] * 2) == pytest.approx(0.368 / 3600)
    assert cost.runtime_minutes(make_pack(4), floor=7) == 7


def test_training_jobs_balance_packs_by_time():
    seconds = {"a": 1.0, "b": 9.0, "c": 4.0, "d": 5.0, "e": 2.0}
    assert cost.training_jobs(seconds, 1) == {p: [p] for p in ("b", "d", "c", "e", "a")}
    # longest first, each to the least loaded job with room: 9 | 5+1 | 4+2
    assert cost.training_jobs(seconds, 2) == {"b": ["b"], "d-and-1-more": ["d", "a"],
                                              "c-and-1-more": ["c", "e"]}
    assert cost.training_jobs(seconds, 9) == {"b-and-4-more": ["b", "d", "c", "e", "a"]}
    assert cost.training_jobs({}, 3) == {}
    with pytest.raises(InputError, match="packs_per_job=0 is not allowed"):
        cost.training_jobs(seconds, 0)


def test_builtin_overhead_grows_with_layers():
    # ResNet-56: overhead 3e-3 x 58 / 9; per image 5e-5 x 0.25; one run, 10 steps x 2.
    step = 3e-3 * 58 / 9 + 100 * 5e-5 * 0.25
    evaluation = 100 * 5e-5 * 0.25 / 3
    assert cost.pack_seconds(make_pack(1, "resnet56")) == pytest.approx(2 * (10 * step
                                                                              + evaluation))


def test_packing_saves_the_overhead_of_all_but_one_run():
    # Built-in per-image time does not depend on N: one run per device pays the per-update
    # overhead N times instead of once, 20 updates in all.
    saved = cost.one_run_per_device_seconds(make_pack(5)) - cost.pack_seconds(make_pack(5))
    assert saved == pytest.approx(4 * 20 * cost.STEP_OVERHEAD_S)


def test_layers_match_the_models():
    for arch in ARCHS:
        recipe = Recipe(family="x", arch=arch, optimizer="sgd", b=1, epochs=1, width=0.0625)
        assert len(build_model(recipe, 1).kernels()) == cost.LAYERS[arch], arch


def test_measured_overheads_by_hand(measured):
    assert measured.device == "gpu-x"
    assert measured.overhead_s["resnet9", 1.0] == pytest.approx(R9_OVERHEAD)
    assert measured.overhead_s["resnet56", 1.0] == pytest.approx(R56_OVERHEAD)
    # Rule 4: unmeasured archs borrow from the closest LAYERS: ResNet-110 (112) from
    # ResNet-56 (58), the ResNet-9 variants (9) from ResNet-9.
    assert measured.overhead_s["resnet110", 1.0] == pytest.approx(R56_OVERHEAD * 112 / 58)
    assert measured.overhead_s["resnet9_ln", 1.0] == pytest.approx(R9_OVERHEAD)


def test_measured_step_seconds_by_hand(measured):
    # N=25 takes the nearest measured N (5) at b=128: (0.080 - 0.008) / 640 = 1.125e-4.
    assert measured.step_seconds("resnet9", 128, 25, 1.0) == pytest.approx(
        R9_OVERHEAD + 25 * 128 * 1.125e-4)
    # b=32 at N=1: nearest b is 16 (log 2 < log 4): (0.010 - 0.008) / 16 = 1.25e-4 per
    # image at width 1, a quarter at width 0.5; the overhead does not scale.
    assert measured.step_seconds("resnet9", 32, 1, 0.5) == pytest.approx(
        R9_OVERHEAD + 32 * 1.25e-4 / 4)
    # N=3 lies nearer 5 than 1 in log ratio.
    assert measured.step_seconds("resnet9", 128, 3, 1.0) == pytest.approx(
        R9_OVERHEAD + 3 * 128 * 1.125e-4)
    # ResNet-110 from ResNet-56: per image (0.100 - R56_OVERHEAD) / 128 x (1e-4 / 5e-5).
    r56_image = (0.100 - R56_OVERHEAD) / 128
    assert measured.step_seconds("resnet110", 16, 1, 1.0) == pytest.approx(
        R56_OVERHEAD * 112 / 58 + 16 * 2 * r56_image)
    # LayerNorm ResNet-9 from ResNet-9: per image x 9e-5 / 6e-5.
    assert measured.step_seconds("resnet9_ln", 16, 1, 1.0) == pytest.approx(
        R9_OVERHEAD + 16 * 1.25e-4 * 1.5)


def test_measured_pack_seconds_by_hand(measured):
    # 4 runs at width 0.5, b=100: nearest N is 5 and its only b is 128: per image
    # 1.125e-4 / 4. Step 0.008 + 400 x 2.8125e-5 = 0.01925 s. Evaluation: nearest b to
    # 1000 is 128 as well: 4 runs x 100 images x 2.8125e-5 / 3 = 3.75e-3 s per epoch.
    epoch = 10 * 0.01925 + 3.75e-3
    assert cost.pack_seconds(make_pack(4), measured) == pytest.approx(2 * epoch)
    assert cost.runtime_minutes(make_pack(4), 1, measured) == 1
    assert cost.gpu_hours([make_pack(4)], measured) == pytest.approx(2 * epoch / 3600)


def test_nearest_width_and_medians(tmp_path):
    # Two widths measured, one point four times (N=1 rows and sequential / N of N=2 rows).
    rows = [("cpu", "resnet9", 16, 1, 0.125, 0.02, 0.02),
            ("cpu", "resnet9", 16, 1, 0.25, 0.05, 0.05),
            ("cpu", "resnet9", 16, 2, 0.25, 0.08, 0.09),
            ("cpu", "resnet9", 16, 2, 0.25, 0.10, 0.11)]
    tp = cost.Throughput.from_csv(write_bench(tmp_path / "b.csv", rows))
    # One b per width: no intercept, so overhead 0 and all time per image.
    assert tp.overhead_s == {}
    # Width 1 uses the 0.25 rows: N=2 median 0.09 s / 32 images x (1 / 0.25)^2.
    assert tp.step_seconds("resnet9", 16, 2, 1.0) == pytest.approx(0.09 * 16)
    # N=1 at 0.25: 0.05 (packed), 0.045 and 0.055 (sequential / 2): median 0.05.
    assert tp.step_seconds("resnet9", 16, 1, 0.25) == pytest.approx(0.05)
    # Width 0.1 uses the 0.125 rows.
    assert tp.step_seconds("resnet9", 16, 1, 0.1) == pytest.approx(0.02 * 0.64)


def test_bad_bench_files_are_named(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        cost.Throughput.from_csv(tmp_path / "none.csv")
    two = write_bench(tmp_path / "two.csv", [ROWS[0], ("cpu", *ROWS[1][1:])])
    with pytest.raises(InputError, match="'cpu', 'gpu-x'"):
        cost.Throughput.from_csv(two)
    with pytest.raises(InputError, match="'tpu' is not allowed"):
        cost.Throughput.from_csv(two, "tpu")
    assert cost.Throughput.from_csv(two, "cpu").device == "cpu"
    bad_arch = write_bench(tmp_path / "arch.csv", [("cpu", "vgg", 16, 1, 1.0, 0.1, 0.1)])
    with pytest.raises(InputError, match="arch='vgg' is not allowed"):
        cost.Throughput.from_csv(bad_arch)
    (tmp_path / "cols.csv").write_text("arch,b\nresnet9,16\n")
    with pytest.raises(InputError, match="N, width, packed_s_per_step"):
        cost.Throughput.from_csv(tmp_path / "cols.csv")


def test_step_path_picks_its_rows_and_only_eager_reads_the_singles(path_bench, measured):
    eager = cost.Throughput.from_csv(path_bench)
    assert eager.overhead_s == measured.overhead_s
    assert eager.per_image_s == measured.per_image_s
    assert eager.source == f"{path_bench}, eager steps"
    graph = cost.Throughput.from_csv(path_bench, step_path="graph")
    # N=1, b=16: the graph step 0.004 alone; the eager singles (0.010) beside it are not a
    # graph path's time. An update's time at a measured point is that point's median
    # whatever the overhead.
    assert graph.step_seconds("resnet9", 16, 1, 1.0) == pytest.approx(0.004)
    assert graph.step_seconds("resnet9", 128, 5, 1.0) == pytest.approx(0.060)
    # N=1, b=128: 0.024 (graph). Intercept through (16, 0.004) and (128, 0.024):
    # 0.004 - 16 x 0.020 / 112 = 0.008 / 7.
    assert graph.overhead_s["resnet9", 1.0] == pytest.approx(0.008 / 7)
    assert graph.source == f"{path_bench}, graph steps"


def test_unknown_step_path_names_the_csvs_paths(path_bench, tmp_path):
    with pytest.raises(InputError, match=r"path 'graph_cl' is not in .*'eager', 'graph'"):
        cost.Throughput.from_csv(path_bench, step_path="graph_cl")
    plain = write_bench(tmp_path / "plain.csv", ROWS)  # no path column: all eager
    assert cost.Throughput.from_csv(plain, step_path="eager").device == "gpu-x"
    with pytest.raises(InputError, match="path 'graph' is not in .*its paths 'eager'$"):
        cost.Throughput.from_csv(plain, step_path="graph")


def test_config_throughput_csv_sets_the_time_limits(tmp_path, monkeypatch):
    assert cost.throughput({"throughput_csv": None}) is cost.BUILTIN
    write_bench(tmp_path / "bench.csv", ROWS)
    monkeypatch.chdir(tmp_path)  # a relative path is relative to the working directory
    measured = cost.throughput({"throughput_csv": "bench.csv", "throughput_device": None})
    assert measured.device == "gpu-x"
    # 2000 epochs of 0.19625 s (test_measured_pack_seconds_by_hand): 392.5 s, x 1.5 =
    # 9.81 min: 10. Built in: 2000 x 0.092 s = 184 s, x 1.5 = 4.6 min: 5.
    long = make_pack(4, epochs=2000)
    assert cost.pack_seconds(long, measured) == pytest.approx(392.5)
    assert cost.runtime_minutes(long, 1, measured) == 10
    assert cost.runtime_minutes(long, 1, cost.BUILTIN) == 5


def test_config_throughput_errors_name_the_key(tmp_path):
    two = write_bench(tmp_path / "two.csv", [ROWS[0], ("cpu", *ROWS[1][1:])])
    assert cost.throughput({"throughput_csv": str(two), "throughput_device": "cpu"}
                           ).device == "cpu"
    with pytest.raises(InputError, match="execution.throughput_csv: .*'cpu', 'gpu-x'"):
        cost.throughput({"throughput_csv": str(two), "throughput_device": None})
    none = tmp_path / "none.csv"
    with pytest.raises(InputError, match=f"execution.throughput_csv: benchmark CSV {none} "
                                         "does not exist; write one with .*null"):
        cost.throughput({"throughput_csv": str(none), "throughput_device": None})
    (tmp_path / "cols.csv").write_text("arch,b\nresnet9,16\n")
    with pytest.raises(InputError, match="execution.throughput_csv: .*lacks column"):
        cost.throughput({"throughput_csv": str(tmp_path / "cols.csv")})


def test_train_flops_by_hand():
    # ResNet-9: prep 32x32x64x3x9 = 1,769,472 MACs; five layers of 75,497,472 each
    # (64->128 at 32x32; two 128->128 at 16x16; 128->256 at 16x16; 256->512 at 8x8;
    # two 512->512 at 4x4, in pairs); dense 512 x 10. x2 (multiply-add) x3 (fwd + bwd).
    assert train_flops_per_image("resnet9", 1.0) == 6 * (1_769_472 + 5 * 75_497_472
                                                                + 5_120)
    # ResNet-56: first conv 442,368; stage 1: 18 x 2,359,296; stages 2 and 3: strided conv
    # 1,179,648 + 17 x 2,359,296 + 1x1 shortcut 131,072 each; dense 64 x 10.
    stage = 1_179_648 + 17 * 2_359_296 + 131_072
    assert train_flops_per_image("resnet56", 1.0) == 6 * (442_368 + 18 * 2_359_296
                                                                 + 2 * stage + 640)


def test_cost_command(tmp_path, capsys):
    bench = write_bench(tmp_path / "bench.csv", ROWS)
    config = ROOT / "config" / "test.yaml"
    assert cli.main(["cost", "--config", str(config), "--bench", str(bench)]) == 0
    out = capsys.readouterr().out
    assert "gpu-x" in out and str(bench) in out
    assert [line.split()[0] for line in out.splitlines()[2:-2]] == ["main", "total"]
    assert out.splitlines()[-2].startswith("epochs: 0 runs as recorded (no --records table)")
    assert cli.main(["cost", "--config", str(config), "--bench", str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err


def table(out: str) -> list[str]:
    """The cost command's table, without its first (source) line."""
    return out.splitlines()[1:]


def test_cost_command_reads_the_configs_throughput_csv(tmp_path, capsys, path_bench):
    bench = write_bench(tmp_path / "bench.csv", ROWS)
    config = write_config(tmp_path / "c.yaml", throughput_csv=str(bench))
    assert cli.main(["cost", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"on gpu-x, from execution.throughput_csv {bench}, eager steps" in out
    assert cli.main(["cost", "--config", str(ROOT / "config" / "test.yaml"),
                     "--bench", str(bench)]) == 0
    assert table(capsys.readouterr().out) == table(out)  # the same model, the same numbers
    # --bench overrides the config's CSV; --bench-path picks a path of either.
    assert cli.main(["cost", "--config", str(config), "--bench", str(path_bench),
                     "--bench-path", "graph"]) == 0
    assert f"from --bench {path_bench}, graph steps" in capsys.readouterr().out
    graph = write_config(tmp_path / "g.yaml", throughput_csv=str(path_bench))
    assert cli.main(["cost", "--config", str(graph), "--bench-path", "graph"]) == 0
    assert f"from execution.throughput_csv {path_bench}, graph steps" in \
        capsys.readouterr().out
    missing = write_config(tmp_path / "m.yaml", throughput_csv=str(tmp_path / "x.csv"))
    assert cli.main(["cost", "--config", str(missing)]) == 2
    assert "execution.throughput_csv: benchmark CSV" in capsys.readouterr().err


def test_cost_command_without_csv_has_only_eager_steps(capsys):
    config = str(ROOT / "config" / "test.yaml")
    assert cli.main(["cost", "--config", config]) == 0
    assert "from built-in constants" in capsys.readouterr().out
    assert cli.main(["cost", "--config", config, "--bench-path", "graph"]) == 2
    assert "--bench-path 'graph' needs a benchmark CSV" in capsys.readouterr().err


def test_projection_sums_families():
    packs = [make_pack(3), make_pack(2, family="depth", arch="resnet56")]
    rows = cost.projection(packs, ["main", "depth"], cost.BUILTIN)
    main, depth, total = rows
    assert total["runs"] == 5 and total["packs"] == 2
    assert total["packed_h"] == pytest.approx(main["packed_h"] + depth["packed_h"])
    assert main["packed_h"] == pytest.approx(cost.pack_seconds(packs[0]) / 3600)
    assert depth["one_run_per_device_h"] == pytest.approx(
        2 * cost.pack_seconds(make_pack(1, family="depth", arch="resnet56")) / 3600)
    assert total["longest_job_h"] == pytest.approx(1 / 60)  # seconds of work: the 1-min floor
    big = make_pack(2, epochs=2000)  # 2000 x (10 x 6e-3 + 1e-3) s = 122 s; x 1.5 = 3.05 min
    assert cost.projection([big], ["main"], cost.BUILTIN)[0]["longest_job_h"] == 4 / 60


def test_cpu_launch_warning_states_the_bill(monkeypatch):
    monkeypatch.setattr(cost, "gpu_available", lambda: False)
    # 200 ResNet-110 runs, 5 epochs of 400 steps of 0.037 + 200 x 100 x 1e-4 = 2.04 s, and
    # 133 s of evaluation per epoch: 4,740 s, over the one-hour threshold.
    big = make_pack(200, "resnet110", width=1.0, epochs=5, train_subset=None,
                    eval_subset=None)
    assert cost.gpu_hours([big]) == pytest.approx(4740 / 3600, rel=1e-3)
    message = cost.cpu_launch_warning([big], confirmed=False)
    assert "200 runs in 1 packs" in message and "confirm_cpu_full=True" in message
    assert cost.cpu_launch_warning([big], confirmed=True) is None
    assert cost.cpu_launch_warning([make_pack(4)], confirmed=False) is None  # 0.2 s of work


def table5_run(optimizer: str = "sgd", sigma_w: float = 0.1, **recipe) -> Run:
    fields = {"family": "depth", "arch": "resnet56", "optimizer": optimizer, "b": 16,
              "epochs": 300, "patience": 30, **recipe}
    return Run(Recipe(**fields), sigma_w, 0)


def test_stopping_estimates_from_table5_plus_patience():
    stopping = cost.config_stopping(grid.load_config(ROOT / "config.yaml"),
                                    ROOT / "paper" / "published")
    # Table 5, b = 16, ResNet-56: SGD's best epoch at sigma_w 0.1 is 13.3, Adam's 10.0.
    assert stopping.epochs(table5_run()) == pytest.approx(13.3 + 30)
    assert stopping.epochs(table5_run("sgd_momentum")) == pytest.approx(43.3)
    assert stopping.epochs(table5_run("adamw")) == pytest.approx(10.0 + 30)  # adaptive
    assert stopping.epochs(table5_run("muon")) == pytest.approx(10.0 + 30)
    assert stopping.epochs(table5_run(patience=None)) == 300  # does not stop early
    assert stopping.epochs(table5_run(epochs=20)) == 20  # not Table 5's recipe: a bound
    assert stopping.epochs(table5_run(sigma_w=0.7)) == 300  # no published number
    # b = 128, sigma_w 2.5: best epoch 177.3 + 30
    assert stopping.epochs(table5_run(sigma_w=2.5, b=128)) == pytest.approx(207.3)


def test_a_records_table_gives_the_measured_epochs(tmp_path):
    run, missing = table5_run(), table5_run(sigma_w=0.5)
    path = tmp_path / "runs.parquet"
    pd.DataFrame({"run_id": [run.run_id, missing.run_id], "status": ["early_stopped", "missing"],
                  "epochs_run": [57, None]}).to_parquet(path)
    stopping = cost.Stopping.from_files(ROOT / "paper" / "published", records=path)
    assert stopping.epochs(run) == 57
    assert stopping.epochs(missing) == pytest.approx(12.1 + 30)  # Table 5's estimate
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(InputError, match="--records .*bad.parquet: not a runs table"):
        cost.Stopping.from_files(ROOT / "paper" / "published", records=tmp_path / "bad.parquet")
    with pytest.raises(InputError, match="published table .*table5.csv does not exist"):
        cost.Stopping.from_files(tmp_path)


def test_compaction_pays_each_stretch_at_the_runs_still_training():
    pack = make_pack(3, epochs=3000)  # minutes of work, so that the time limits differ
    stops = dict(zip([r.run_id for r in pack.runs], (1000, 2000, 3000), strict=True))
    stopping = cost.Stopping({}, measured=stops)

    def epoch(n: int) -> float:
        return cost.pack_seconds(make_pack(n, epochs=1))

    # 1000 epochs with 3 runs, 1000 with 2, 1000 with 1; without compaction 3000 with 3
    assert cost.pack_seconds(pack, stopping=stopping) == pytest.approx(
        1000 * (epoch(3) + epoch(2) + epoch(1)))
    assert cost.pack_seconds(pack, stopping=stopping, compaction=False) == pytest.approx(
        3000 * epoch(3))
    assert cost.runtime_minutes(pack, 1, stopping=stopping) < cost.runtime_minutes(
        pack, 1, stopping=stopping, compaction=False)


def test_paper_projection_counts_early_stopping_and_compaction():
    config = grid.load_config(ROOT / "config.yaml")
    stopping = cost.config_stopping(config, ROOT / "paper" / "published")
    packs = list(grid.make_packs(config).values())
    rows = {r["family"]: r for r in cost.projection(packs, config["families"], cost.BUILTIN,
                                                    stopping)}
    depth, main = rows["depth"], rows["main"]
    assert depth["packed_h"] < depth["uncompacted_h"] < depth["all_epochs_h"]
    assert main["packed_h"] == main["uncompacted_h"] == main["all_epochs_h"]  # no patience
