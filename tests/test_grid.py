"""Grid expansion (the paper's run counts, merging, packs) and the config error catalogue."""

import copy
import dataclasses
from pathlib import Path

import pytest
import yaml

from initmem import cli
from initmem.plan import grid
from initmem.plan.architectures import ARCHS
from initmem.plan.schema import SCHEMA_PATH, schema
from initmem.plan.spec import DATASET_SIZES, DATASETS, OPTIMIZERS, SCHEDULES, Recipe

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "config.yaml"
DEMO = ROOT / "config" / "demo.yaml"


@pytest.fixture(scope="module")
def paper():
    return grid.load_config(PAPER)


def small(**families) -> dict:
    """A minimal valid config; families replace the default one."""
    return {
        "optimizers": {"sgd": {"label": "SGD"},
                       "sgd_momentum": {"label": "SGD-m", "hyperparameters": {"momentum": 0.9}},
                       "adamw": {"label": "AdamW", "hyperparameters": {"weight_decay": 1e-4}}},
        "seed_sets": {"one": [0], "two": [0, 1]},
        "sigma_sets": {"two": [0.5, 1.0], "range": {"start": 0.1, "stop": 0.3, "step": 0.1}},
        "common": {"lr0": 1e-3, "epochs": 2},
        "families": families or {"main": {"recipe": {"arch": "resnet9", "b": 16},
                                          "grid": {"optimizer": ["sgd", "adamw"]},
                                          "sigma_w": "two", "seeds": "two"}},
    }


def test_paper_config_expands_to_the_papers_run_counts(paper):
    counts = {fam: len(grid.family_runs(paper, fam)) for fam in paper["families"]}
    # main 25 x 5 x 5 x 10; long_sgd 2 x 5; lr_l2 19 x 5 x 1 + 3 x 5 x 10; norm_aug
    # 2 x 2 x 2 x 5 x 5; best_recipe 2 x 3 x 2 x 10; depth 3 x 5 x 2 x 5 x 10
    assert counts == {"main": 6250, "long_sgd": 10, "lr_l2": 245, "norm_aug": 200,
                      "best_recipe": 120, "depth": 1500}


def test_lr_l2_seeds_follow_table_4(paper):
    seeds = {}
    for run in grid.family_runs(paper, "lr_l2"):
        r = run.recipe
        seeds.setdefault((r.lr0, r.l2, r.b), set()).add(run.seed)
    assert (1e-3, 0.0, 16) not in seeds and (1e-3, 0.0, 128) not in seeds  # main grid's SGD
    ten = {k for k, v in seeds.items() if len(v) == 10}
    assert ten == {(1e-2, 1e-2, 16), (1e-2, 1e-2, 128), (1e-1, 0.0, 128)}
    assert all(v == {42} for k, v in seeds.items() if k not in ten)
    assert len(seeds) == 22


def test_main_grid_sigma_w_are_the_25_exact_decimals(paper):
    sigmas = sorted({run.sigma_w for run in grid.family_runs(paper, "main")})
    assert sigmas == [round(0.1 * i, 1) for i in range(1, 26)]


def test_table_1_defaults_merge_under_explicit_fields(paper):
    recipes = {(r.recipe.family, r.recipe.optimizer): r.recipe for r in grid.expand_runs(paper)}
    assert recipes["main", "sgd_momentum"].optimizer_hyperparameters["momentum"] == 0.9
    assert recipes["main", "adamw"].weight_decay == 1e-4
    assert recipes["main", "adam"].weight_decay == 0.0
    best_sgd = recipes["best_recipe", "sgd_momentum"]
    assert (best_sgd.lr0, best_sgd.l2, best_sgd.optimizer_hyperparameters["momentum"],
            best_sgd.epochs) == (0.1, 5e-4, 0.9, 200)


def test_precedence_common_optimizer_recipe_variant_grid():
    config = small(f={"recipe": {"arch": "resnet9", "b": 16, "optimizer": "sgd_momentum",
                                 "lr0": 0.5},
                      "variants": [{"hyperparameters": {"momentum": 0.5}}, {"lr0": 0.25}],
                      "grid": {"epochs": [3]}, "sigma_w": "two", "seeds": "one"})
    config["families"]["f"]["recipe"]["hyperparameters"] = {"weight_decay": 0.01}
    config["common"]["hyperparameters"] = {"momentum": 0.1}  # below Table 1's 0.9
    recipes = [r.recipe for r in grid.expand_runs(grid.validate_config(config))]
    first, second = (r.optimizer_hyperparameters | {"lr0": r.lr0, "epochs": r.epochs}
                     for r in (recipes[0], recipes[-1]))
    # variant over table; a hyperparameter at a time, so the recipe's decay stays
    assert first == {"momentum": 0.5, "weight_decay": 0.01, "lr0": 0.5, "epochs": 3}
    # table over common, variant over recipe
    assert second == {"momentum": 0.9, "weight_decay": 0.01, "lr0": 0.25, "epochs": 3}


def test_runs_are_ordered_seed_major_and_packs_cut_whole_sweeps(paper):
    packs = grid.make_packs(paper)
    assert len(packs) == 351
    first = next(iter(packs.values()))
    assert [(r.seed, r.sigma_w) for r in first.runs][:2] == [(0, 0.1), (0, 0.2)]
    assert {r.seed for r in first.runs} == {0} and len(first.runs) == 25
    runs = [run for pack in packs.values() for run in pack.runs]
    assert len(runs) == len({r.run_dir for r in runs}) == 8325
    assert all(len(p.runs) <= 25 for p in packs.values())
    assert "main-resnet9-w1-sgd-lr0.001-cosine-e300-b16-p0" in packs


def test_pack_size_regroups_without_renaming_runs(paper):
    config = copy.deepcopy(paper)
    config["execution"]["pack_size"] = 7
    regrouped = grid.make_packs(config)
    assert all(len(p.runs) <= 7 for p in regrouped.values())
    dirs = sorted(r.run_dir for p in regrouped.values() for r in p.runs)
    assert dirs == sorted(r.run_dir for r in grid.expand_runs(paper))


def test_validate_fills_defaults_and_keeps_input():
    config = small()
    checked = grid.validate_config(config)
    assert "execution" not in config
    assert checked["execution"] == {"pack_size": 25, "packs_per_job": 1, "device": "auto",
                                    "gpus_per_job": 1, "cpus_per_job": 4, "mem_mb": 32000,
                                    "min_runtime_min": 30,
                                    "throughput_csv": None, "throughput_device": None,
                                    "cuda_graphs": "auto", "channels_last": "auto",
                                    "compaction": True, "tensorboard": None}
    assert checked["archive"] is None and checked["confirm_cpu_full"] is False


def test_schema_fields_and_enums_mirror_the_spec():
    defs = schema()["$defs"]
    recipe_fields = {f.name for f in dataclasses.fields(Recipe)} - {"family"}
    assert set(defs["recipe"]["properties"]) == recipe_fields
    assert set(defs["grid"]["properties"]) == recipe_fields
    assert tuple(defs["field"]["arch"]["enum"]) == tuple(ARCHS)
    assert set(DATASET_SIZES) == set(DATASETS) == set(defs["field"]["dataset"]["enum"])
    assert tuple(defs["field"]["schedule"]["enum"]) == SCHEDULES
    # networks are their declarations (initmem.plan.architectures): the file lists none
    assert "enum" not in yaml.safe_load(SCHEMA_PATH.read_text())["$defs"]["field"]["arch"]
    # optimizers are the modules of training/optimizers/: no enum to keep in step
    assert "enum" not in defs["field"]["optimizer"]
    assert {"sgd", "sgd_momentum", "adam", "adamw", "muon", "lion"} <= set(OPTIMIZERS)


def test_demo_config_has_every_family_at_reduced_size(paper):
    demo = grid.load_config(DEMO)
    assert list(demo["families"]) == list(paper["families"])
    assert demo["execution"]["gpus_per_job"] == 0
    for run in grid.expand_runs(demo):
        assert run.recipe.width <= 0.125 and run.recipe.train_subset <= 1000
        assert run.recipe.epochs * run.recipe.train_subset <= 6 * 256  # long_sgd: 6 epochs


def bad(edit) -> dict:
    config = small()
    edit(config)
    return config


def fam(config) -> dict:
    return config["families"]["main"]


ERRORS = [  # (edit of a valid config, fragments the message must contain)
    (lambda c: fam(c)["recipe"].update(arch="resnet8"),
     ["families.main.recipe.arch='resnet8' is not allowed", f"one of {', '.join(ARCHS)}"]),
    (lambda c: fam(c).update(reciep={}),
     ["families.main: unknown key(s) 'reciep'", "allowed keys: exclude, grid, recipe"]),
    (lambda c: c.update(execution={"pack_size": 0}),
     ["execution.pack_size=0 is not allowed", "must be >= 1"]),
    (lambda c: c.update(execution={"device": "tpu"}),
     ["execution.device='tpu'", "one of auto, cpu, cuda"]),
    (lambda c: c.update(execution={"cuda_graphs": "on"}),
     ["execution.cuda_graphs='on' is not allowed", "one of auto, True, False"]),
    (lambda c: fam(c)["grid"].update(b=[16, "x"]),
     ["families.main.grid.b[1]='x' is not allowed", "of type integer"]),
    (lambda c: fam(c)["grid"].update(b=[16, 0]),
     ["families.main.grid.b[1]=0 is not allowed", "must be >= 1"]),
    (lambda c: c["sigma_sets"].update(two=[-0.5, 2.0]),
     ["sigma_sets.two=[-0.5, 2.0] is not allowed", "list of positive numbers"]),
    (lambda c: fam(c)["recipe"].update(lr0=0),
     ["families.main.recipe.lr0=0 is not allowed", "must be > 0"]),
    (lambda c: c["seed_sets"].update(one=[0, 0]),
     ["seed_sets.one=[0, 0]", "without repeated values"]),
    (lambda c: c["sigma_sets"].update(bad={"start": 1}),
     ["sigma_sets.bad={'start': 1}", "list of positive numbers or {start, stop, step}"]),
    (lambda c: c["families"].update(Main=fam(c)),
     ["families: name 'Main' is not allowed", "names must match"]),
    (lambda c: fam(c).pop("seeds"), ["families.main: missing required key(s) 'seeds'"]),
    (lambda c: fam(c).update(seeds="paper11"),
     ["families.main.seeds='paper11' is not allowed", "seed_sets: one, two"]),
    (lambda c: fam(c).update(sigma_w="nine"),
     ["families.main.sigma_w='nine'", "sigma_sets: two, range"]),
    (lambda c: fam(c)["grid"].update(optimizer=["sgd", "muon_orthogonal"]),
     ["families.main.grid.optimizer: optimizer='muon_orthogonal' is not allowed",
      "optimizers: sgd, sgd_momentum, adamw"]),
    # a name no optimizer module will ever have; the listing names every declared one, so
    # adding any optimizer (adagrad sorts before adam) must not turn this red
    (lambda c: c["optimizers"].update(no_such_optimizer={"label": "?"}),
     ["optimizers.no_such_optimizer: optimizer 'no_such_optimizer' is not implemented",
      f"implemented: {', '.join(OPTIMIZERS)} (",
      "src/initmem/training/optimizers/no_such_optimizer.py"]),
    (lambda c: c["sigma_sets"].update(range={"start": 1.0, "stop": 0.5, "step": 0.1}),
     ["sigma_sets.range: stop=0.5 is not allowed", ">= start=1.0"]),
    (lambda c: fam(c).update(exclude=[{"optimizer": "sgd"}, {"optimizer": "adamw"}]),
     ["families.main: the grid is empty"]),
    (lambda c: fam(c).update(exclude=[{"lr0": 0.5}]),
     ["families.main.exclude[0]={'lr0': 0.5} matches no grid point"]),
    (lambda c: fam(c).update(seed_overrides=[{"match": {"b": 32}, "seeds": "one"}]),
     ["families.main.seed_overrides[0]={'b': 32} matches no grid point"]),
    (lambda c: fam(c).update(variants=[{"width": 0.5}, {"width": 0.5}]),
     ["appears twice"]),
    (lambda c: c["sigma_sets"].update(two=[0.501, 0.504]),
     ["would share the record folder main/", "sw0.50-s0", "2 decimals"]),
    (lambda c: c["families"].update(copy=copy.deepcopy(fam(c))),
     ["duplicates main/", "families main and copy", "exclude it from one of them"]),
    (lambda c: c["common"].pop("epochs"),
     ["families.main at {'optimizer': 'sgd'}: no value for", "'epochs'"]),
    (lambda c: fam(c)["recipe"].update(hyperparameters={"momentum": 0.5}),
     ["families.main at {'optimizer': 'sgd'}", "hyperparameters.momentum=0.5 is not allowed "
      "for optimizer sgd; its hyperparameters: weight_decay"]),
    # a config of before record schema 5: the optimizer's settings as recipe fields
    (lambda c: fam(c)["recipe"].update(momentum=0.5),
     ["families.main.recipe.momentum=0.5 is not allowed; momentum is an optimizer "
      "hyperparameter now: write hyperparameters: {momentum: 0.5}"]),
    (lambda c: c["optimizers"]["sgd"].update(muon_adam_weight_decay=0.004),
     ["optimizers.sgd.muon_adam_weight_decay=0.004 is not allowed",
      "write hyperparameters: {adam_weight_decay: 0.004}"]),
]


@pytest.mark.parametrize(("edit", "fragments"), ERRORS)
def test_config_errors_name_key_value_and_allowed(edit, fragments):
    with pytest.raises(grid.ConfigError) as err:
        grid.validate_config(bad(edit))
    for fragment in fragments:
        assert fragment in str(err.value)


def test_every_schema_error_is_listed_at_once():
    def two_mistakes(c):
        c["execution"] = {"pack_size": 0}
        fam(c)["recipe"]["arch"] = "resnet8"

    with pytest.raises(grid.ConfigError) as err:
        grid.validate_config(bad(two_mistakes))
    assert "execution.pack_size=0" in str(err.value)
    assert "families.main.recipe.arch='resnet8'" in str(err.value)


def test_cli_grid_counts_runs_and_writes_pack_specs(tmp_path, capsys):
    assert cli.main(["grid", "--config", str(PAPER), "--packs-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "lr_l2           245 runs    25 packs" in out
    assert "total          8325 runs   351 packs" in out
    spec = yaml.safe_load((tmp_path / "long_sgd-resnet9-w1-sgd-lr0.001-constant-e5000-b16-p0"
                           ".json").read_text())
    assert spec["recipe"]["epochs"] == 5000 and len(spec["runs"]) == 5


def test_cli_reports_a_bad_config_in_one_line(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad(lambda c: fam(c).update(seeds="nope"))))
    assert cli.main(["grid", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "families.main.seeds='nope' is not allowed" in err and "Traceback" not in err


def test_an_archives_config_of_before_schema_5_reads_in_todays_spelling():
    """An archive's config wrote the optimizer's momentum and decays as recipe fields:
    read from the archive, they are the hyperparameters they are now (muon_adam_weight_decay
    as Keras' adam_weight_decay), their unset values dropped, and the runs are the same."""
    today = small(main={"recipe": {"arch": "resnet9", "b": 16},
                        "variants": [{"optimizer": "sgd"}, {"optimizer": "sgd_momentum"},
                                     {"optimizer": "muon", "hyperparameters": {
                                         "weight_decay": 1e-3, "adam_weight_decay": 0.004}}],
                        "sigma_w": "two", "seeds": "one"})
    old = copy.deepcopy(today)
    old["optimizers"] = {"sgd": {"label": "SGD", "momentum": 0.0, "weight_decay": 0.0},
                         "sgd_momentum": {"label": "SGD-m", "momentum": 0.9,
                                          "weight_decay": 0.0},
                         "adamw": {"label": "AdamW", "weight_decay": 1e-4},
                         "muon": {"label": "Muon", "muon_adam_weight_decay": None}}
    today["optimizers"]["muon"] = {"label": "Muon"}
    old["families"]["main"]["variants"][2] = {"optimizer": "muon", "weight_decay": 1e-3,
                                              "muon_adam_weight_decay": 0.004}
    assert grid.archived(old) == grid.archived(today)
    assert grid.validate_config(grid.archived(old)) == grid.validate_config(grid.archived(today))
    runs = [r.run_id for r in grid.expand_runs(grid.validate_config(grid.archived(old)))]
    assert runs[-1].startswith("main:resnet9-w1-muon-lr0.001-cosine-e2-wd0.001-awd0.004:b16")
    with pytest.raises(grid.ConfigError, match="write hyperparameters: {momentum: 0.9}"):
        grid.validate_config(old)  # a config typed in the old spelling: told how to write it
