"""The input layer: exact spec round-trips, and every bad input one line with status 2.

The catalogue feeds `initmem train`, `initmem grid` and Snakemake the malformed specs,
configs and CIFAR-10 copies a hostile user tried (swapped, renamed, foreign, truncated
batch files; an impossible width; a full disk for checkpoints and for records), and
asserts one line on stderr, the exit status, the key (or file) named, and nothing under
the output folder changed. Its other cases sit where their machinery is tested:
test_integrity (damaged records and archive tar headers), test_verify (one line per run),
test_resume (no checkpoint generation restores; a killed save's temporary file).
"""

from __future__ import annotations

import copy
import errno
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import pytest
import yaml
from fakes import DAMAGED_COPIES, PER_BATCH, fake_cifar
from workflow_helpers import TEST_CONFIG, snakemake

from initmem import cli
from initmem.errors import InputError
from initmem.plan import grid
from initmem.plan.inputs import parse_json, parse_yaml
from initmem.plan.spec import Pack, Recipe, Run, check_field
from initmem.training import data

BASE = {"family": "t", "arch": "resnet9", "optimizer": "sgd", "b": 8, "epochs": 1,
        "width": 0.0625, "dataset": "synthetic", "train_subset": 16, "eval_subset": 8}


def spec(**recipe) -> dict:
    return {"recipe": {**BASE, **recipe}, "runs": [{"sigma_w": 0.5, "seed": 0}]}


def test_pack_dump_and_load_round_trip_small_and_large_floats(tmp_path):
    for exponent in range(-12, 4):
        for mantissa in (1.0, 1.2345678901234567, 9.87654321):
            x = mantissa * 10.0**exponent
            recipe = Recipe(**{**BASE, "lr0": x, "l2": x, "width": x,
                               "hyperparameters": {"weight_decay": x}})
            pack = Pack(recipe, (Run(recipe, x, 0),))
            pack.dump(tmp_path / "s.json")
            assert Pack.load(tmp_path / "s.json") == pack, x


def test_random_specs_round_trip_exactly(tmp_path):
    rng = random.Random(0)

    def number(low: float, high: float) -> float:  # log-uniform, any mantissa
        return 10 ** rng.uniform(low, high)

    for _ in range(200):
        recipe = Recipe(**{**BASE, "optimizer": "sgd_momentum", "lr0": number(-12, 3),
                           "width": number(-3, 0),
                           "cosine_alpha": rng.random(), "l2": rng.choice([0.0, number(-12, 3)]),
                           "hyperparameters": {
                               "momentum": 0.001 + rng.random() * 0.998,
                               "weight_decay": rng.choice([0.0, number(-12, 3)])}})
        sigmas = sorted({round(number(-2, 1), rng.choice([2, 6, 17])) for _ in range(3)})
        runs = {f"{s:.2f}": Run(recipe, s, rng.randrange(2**31)) for s in sigmas}
        pack = Pack(recipe, tuple(runs.values()))
        pack.dump(tmp_path / "s.json")
        assert Pack.load(tmp_path / "s.json") == pack


def test_yaml_floats_read_as_yaml_1_2_and_json_write_them():
    assert parse_yaml("a: 1e-05\nb: 1.0e-5\nc: 1e3\nd: .5\ne: -2E+2\nf: '1e-5'") == {
        "a": 1e-05, "b": 1e-05, "c": 1000.0, "d": 0.5, "e": -200.0, "f": "1e-5"}
    assert parse_yaml("n: 12\ns: abc\nt: true") == {"n": 12, "s": "abc", "t": True}


@pytest.mark.slow
def test_a_config_with_a_small_lr0_trains_through_the_workflow(tmp_path):
    text = TEST_CONFIG.read_text().replace("lr0: 1.0e-3", "lr0: 1.0e-5")
    assert "lr0: 1.0e-5" in text
    config_path = tmp_path / "small_lr.yaml"
    config_path.write_text(text)
    pack = next(iter(grid.make_packs(grid.load_config(config_path)).values()))
    assert pack.recipe.lr0 == 1e-5
    target = f"results/runs/{pack.runs[0].run_dir}/summary.parquet"
    done = snakemake(tmp_path, config_path, target)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / target).exists()


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


def snapshot(folder) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def mutated(change) -> dict:
    data = copy.deepcopy(spec())
    change(data)
    return data


def text_of(data: dict) -> str:
    return json.dumps(data)


# "Billion laughs": 1 KB of aliases that expand to 9^9 strings (gigabytes) when followed.
ALIAS_BOMB = 'l0: &l0 "lol"\n' + "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n"
                                          for i in range(1, 10))
DEEP = "[" * 100_000 + "]" * 100_000  # nested past any recursive parser's stack

# name -> (file text, the key or words the one line must name)
SPEC_CASES = {
    "sigma_w string": (text_of(mutated(lambda d: d["runs"][0].update(sigma_w="abc"))),
                       "sigma_w"),
    "sigma_w numeric string": (text_of(mutated(lambda d: d["runs"][0].update(sigma_w="1.5"))),
                               "sigma_w"),
    "sigma_w bool": (text_of(mutated(lambda d: d["runs"][0].update(sigma_w=True))), "sigma_w"),
    "sigma_w missing": (text_of(mutated(lambda d: d["runs"][0].pop("sigma_w"))), "sigma_w"),
    "runs of numbers": (text_of(mutated(lambda d: d.update(runs=[1]))), "runs"),
    "recipe a list": (text_of(mutated(lambda d: d.update(recipe=[1, 2]))), "recipe"),
    "epochs bool": (text_of(spec(epochs=True)), "epochs"),
    "b bool": (text_of(spec(b=True)), "b"),
    "epochs huge": (text_of(spec(epochs=10**12)), "epochs"),
    "cosine_alpha string": (text_of(spec(cosine_alpha="x")), "cosine_alpha"),
    "momentum string": (text_of(spec(hyperparameters={"momentum": "x"})), "momentum"),
    "momentum a former field": (text_of(spec(momentum=0.5)), "momentum"),
    "hyperparameters text of no numbers": (text_of(spec(hyperparameters="momentum=x")),
                                           "hyperparameters"),
    "hyperparameters text of no pairs": (text_of(spec(hyperparameters="momentum")),
                                         "hyperparameters"),
    "momentum out of range as text": (text_of(spec(hyperparameters="momentum=1.0")),
                                      "momentum"),
    "b above the training set": (text_of(spec(b=32)), "b"),
    "train_subset above synthetic": (text_of(spec(train_subset=5000)), "train_subset"),
    "eval_subset above synthetic": (text_of(spec(eval_subset=4000)), "eval_subset"),
    "best_test_subset above synthetic": (text_of(spec(best_test_subset=4000)),
                                         "best_test_subset"),
    "best_test_subset within eval_subset": (text_of(spec(best_test_subset=8)),
                                            "best_test_subset"),
    "width huge": (text_of(spec(width=1e6)), "width"),
    "colliding sigma_w": (text_of(mutated(lambda d: d.update(
        runs=[{"sigma_w": 0.501, "seed": 0}, {"sigma_w": 0.504, "seed": 0}]))), "sw0.50-s0"),
    "duplicate key": ("recipe: {arch: resnet9, arch: resnet56}\nruns: []\n", "duplicate key"),
    "YAML syntax error": ("recipe: [1, 2\n", "line"),
    "binary file": ("\0\x89PNG\r\n", "text file"),
    "not a mapping": ("- 1\n- 2\n", "mapping"),
    "alias bomb": (ALIAS_BOMB, "refused at line 1, column 5: an anchor or alias"),
    "nested 100,000 deep": (f"recipe: {DEEP}\n", "nested deeper than 64 levels"),
}


@pytest.mark.parametrize("case", sorted(SPEC_CASES))
def test_bad_specs_are_one_line_with_status_2(tmp_path, capsys, case):
    text, named = SPEC_CASES[case]
    spec_path, out = tmp_path / "spec.json", tmp_path / "out"
    spec_path.write_text(text)
    out.mkdir()
    (out / "kept.txt").write_text("untouched")
    before = snapshot(out)
    code, err = run_cli(["train", str(spec_path), str(out), "--device", "cpu"], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert named in err, err
    assert snapshot(out) == before


def test_missing_spec_file_and_folder_are_named(tmp_path, capsys):
    for path in (tmp_path / "nope.json", tmp_path):
        code, err = run_cli(["train", str(path), str(tmp_path / "out"), "--device", "cpu"],
                            capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and str(path) in err, err
    assert not (tmp_path / "out").exists()


def test_a_data_root_that_is_a_file_is_named(tmp_path, capsys):
    spec_path, root = tmp_path / "spec.json", tmp_path / "root"
    spec_path.write_text(text_of(spec(dataset="cifar10", train_subset=16)))
    root.write_text("not a folder")
    code, err = run_cli(["train", str(spec_path), str(tmp_path / "out"), "--device", "cpu",
                         "--data-root", str(root)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{root} is a file" in err


@pytest.mark.parametrize("allow", [[], ["--allow-unverified"]], ids=["refused", "allowed"])
@pytest.mark.parametrize("case", sorted(DAMAGED_COPIES))
def test_a_damaged_cifar10_copy_is_one_line_with_status_2(tmp_path, capsys, monkeypatch,
                                                          case, allow):
    """A swapped, renamed, foreign or truncated batch file: named in one line, with or
    without --allow-unverified, before any output is written."""
    monkeypatch.setattr(data, "IMAGES_PER_FILE", PER_BATCH)
    damage, named = DAMAGED_COPIES[case]
    root, out, spec_path = tmp_path / "cifar", tmp_path / "out", tmp_path / "spec.json"
    fake_cifar(root)
    damage(root / data.FOLDER)
    spec_path.write_text(text_of(spec(dataset="cifar10", train_subset=16)))
    code, err = run_cli(["train", str(spec_path), str(out), "--device", "cpu",
                         "--data-root", str(root), *allow], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert all(words in err for words in named), err
    assert not any(out.rglob("*.parquet"))


CONFIG_CASES = {
    "duplicate key": (lambda text: text.replace("  pack_size: 2\n",
                                                "  pack_size: 2\n  pack_size: 3\n"),
                      "duplicate key 'pack_size'"),
    "lr0 string": (lambda text: text.replace("lr0: 1.0e-3", "lr0: '1e-3'"), "lr0"),
    "b bool": (lambda text: text.replace("b: 32", "b: true"), "b"),
    "sigma_w numeric string": (lambda text: text.replace("two: [0.5, 2.0]", "two: ['1.5']"),
                               "sigma_sets.two"),
    "b above the training set": (lambda text: text.replace("b: 32", "b: 128"), "b=128"),
    "YAML syntax error": (lambda text: text + "families: [\n", "line"),
    "alias bomb": (lambda text: ALIAS_BOMB + text, "an anchor or alias (&name, *name)"),
    "width huge": (lambda text: text.replace("width: 0.125", "width: 1.0e+6"),
                   "families.main: width=1e+06 is not allowed on a CPU training job"),
    "width huge on a GPU": (lambda text: text.replace("width: 0.125", "width: 1.0e+6")
                            .replace("device: cpu", "device: cuda")
                            .replace("gpus_per_job: 0", "gpus_per_job: 1"),
                            "width=1e+06 is not allowed on an H100-class GPU"),
    "width past any float": (lambda text: text.replace("width: 0.125", "width: 1.0e300"),
                             "needs more than any device has"),
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_bad_configs_are_one_line_with_status_2(tmp_path, capsys, case):
    edit, named = CONFIG_CASES[case]
    path = tmp_path / "config.yaml"
    path.write_text(edit(TEST_CONFIG.read_text()))
    code, err = run_cli(["grid", "--config", str(path), "--packs-dir", str(tmp_path / "p")],
                        capsys)
    assert code == 2, err
    assert named in err.splitlines()[0], err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("text", [ALIAS_BOMB, f"families: {DEEP}\n"], ids=["aliases", "deep"])
def test_a_config_bomb_ends_in_one_line_within_seconds(tmp_path, text):
    """As a separate process with a time limit: an alias bomb or a 100,000-deep nesting
    costs no memory to speak of and ends at once, naming the file and line."""
    path = tmp_path / "config.yaml"
    path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "initmem", "grid", "--config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"initmem grid: error: {path}: refused at line 1" in done.stderr


@pytest.mark.parametrize("command", ["grid", "train"])
def test_a_python_tag_in_a_config_or_spec_runs_nothing(tmp_path, capsys, command):
    """A crafted file's `!!python/object/apply:os.system`: one line naming the tag and its
    line, status 2, and the shell command never run."""
    marker = tmp_path / "ran"
    tag = f"!!python/object/apply:os.system ['touch {marker}']"
    path, out = tmp_path / "input.yaml", tmp_path / "out"
    if command == "grid":
        path.write_text(TEST_CONFIG.read_text().replace("pack_size: 2", f"pack_size: {tag}"))
        argv = ["grid", "--config", str(path), "--packs-dir", str(out)]
    else:
        path.write_text(f"recipe: {tag}\nruns: []\n")
        argv = ["train", str(path), str(out), "--device", "cpu"]
    code, err = run_cli(argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{path}: refused at line" in err, err
    assert "the tag 'tag:yaml.org,2002:python/object/apply:os.system'" in err, err
    assert not marker.exists() and not out.exists()


def test_deep_json_is_refused():
    for deep in (DEEP, "[" * 100 + "]" * 100):  # past the parser's bound, then ours
        with pytest.raises(InputError, match="m.json: JSON nested deeper than 64 levels"):
            parse_json(deep, "m.json", len(deep))
    # brackets inside strings, and an escaped backslash ending one, are not nesting
    text = r'{"a": ["[[[[", {"b": "\\"}]}'
    assert parse_json(text, "m.json", 100) == {"a": ["[[[[", {"b": "\\"}]}


def test_json_is_read_in_linear_time_within_its_bound():
    # an unterminated string of quotes and backslashes: the pattern that stripped strings
    # before counting brackets took 42 s at 40k characters
    text = "[\"" + '\\"' * 300_000
    started = time.perf_counter()
    with pytest.raises(InputError, match="m.json: not valid JSON"):
        parse_json(text, "m.json", len(text))
    assert time.perf_counter() - started < 1
    with pytest.raises(InputError, match="m.json: 11 bytes of JSON, more than the 10"):
        parse_json(b"[1,2,3,4,5]", "m.json", 10)
    with pytest.raises(InputError, match="m.json: not valid JSON"):  # a 5,000-digit integer
        parse_json("9" * 5000, "m.json", 10_000)


def test_config_check_and_spec_check_agree_on_a_bool_b():
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["families"]["main"]["recipe"]["b"] = True
    with pytest.raises(InputError, match="b=True"):
        grid.validate_config(config)
    with pytest.raises(InputError, match="b=True"):
        Pack.from_dict(spec(b=True))


@pytest.mark.parametrize(("good", "bad"), [(1, True), (0, False)])
def test_a_remembered_field_check_tells_equal_keys_of_other_types_apart(good, bad):
    """check_field remembers its answer per value (spec._in_domain): 1 == True as a key,
    so the value's type is part of it; a seed of 1 passing first lets no True through."""
    check_field("seed", good)
    with pytest.raises(InputError, match=f"seed={bad!r}"):
        check_field("seed", bad)


def train_tiny(tmp_path, capsys, out) -> tuple[int, str]:
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(text_of(spec()))
    return run_cli(["train", str(spec_path), str(out), "--device", "cpu", "--no-progress"],
                   capsys)


def full_disk_for(monkeypatch, kind: str) -> None:
    """fsync fails with a full disk for the temporary files whose name holds `kind`
    (".ckpt." for checkpoints, ".parquet." for record files); others are written."""
    fsync = os.fsync

    def full(fd):
        if kind in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", full)


def test_a_full_disk_is_one_line_naming_the_file_and_the_room_needed(tmp_path, capsys,
                                                                     monkeypatch):
    full_disk_for(monkeypatch, ".ckpt.")
    code, err = train_tiny(tmp_path, capsys, tmp_path / "out")
    assert code == cli.IO_EXIT and len(err.strip().splitlines()) == 1, err
    assert str(tmp_path / "out") in err and "latest.pt: No space left" in err, err
    assert "two copies of the checkpoint of each of its packs" in err


def test_a_full_disk_writing_a_record_gives_no_checkpoint_advice(tmp_path, capsys,
                                                                monkeypatch):
    full_disk_for(monkeypatch, ".parquet.")
    code, err = train_tiny(tmp_path, capsys, tmp_path / "out")
    assert code == cli.IO_EXIT and len(err.strip().splitlines()) == 1, err
    assert "history.parquet: No space left on device; free space on that disk" in err, err
    assert "checkpoint" not in err


def test_a_read_only_output_folder_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    def read_only(*_args, dir, **_kw):  # noqa: A002 (mkstemp's own name)
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), dir)

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    code, err = train_tiny(tmp_path, capsys, tmp_path / "out")
    assert code == cli.IO_EXIT and len(err.strip().splitlines()) == 1, err
    assert str(tmp_path / "out") in err and "read-only" in err, err


def test_an_output_folder_under_a_file_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    code, err = train_tiny(tmp_path, capsys, tmp_path / "file" / "out")
    assert code == cli.IO_EXIT and len(err.strip().splitlines()) == 1, err
    assert str(tmp_path / "file") in err and "not a folder" in err, err


def test_a_closed_pipe_ends_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "initmem", "grid", "--config",
                             str(TEST_CONFIG)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # as `| head` does once it has its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err == ""


@pytest.mark.parametrize("case", ["duplicate key", "b bool", "width huge"])
def test_snakemake_refuses_a_bad_config_in_one_line(tmp_path, case):
    """Under Snakemake the same one line, and nothing of Snakemake's but its profile
    notice: no frames before (or after) the line that names the key and value."""
    edit, named = CONFIG_CASES[case]
    path = tmp_path / "config.yaml"
    path.write_text(edit(TEST_CONFIG.read_text()))
    done = snakemake(tmp_path, path, "-n")
    lines = [line for line in (done.stdout + done.stderr).splitlines()
             if not line.startswith("Using profile")]
    assert done.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith("error: ") and named in lines[0], lines
