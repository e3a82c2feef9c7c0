"""Each runs archive records the environment it was packed in; `initmem verify` and the
HTML report name the packages a rebuild's environment has at other versions (a warning,
not a refusal); the laptop study rebuilds byte for byte in two fresh clones."""

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import time

import pandas as pd
import pytest
from fakes import write_fake_run
from test_archive import resealed, tar_with
from workflow_helpers import ROOT, TEST_CONFIG

from initmem import cli
from initmem.errors import InputError
from initmem.paper import report
from initmem.plan import grid
from initmem.records import archive, environment
from initmem.records.files import RecordError

LAPTOP_ARCHIVE = ROOT / "results" / "laptop" / "v2" / "runs.tar"  # packed before the record


@pytest.fixture
def packed(tmp_path):
    config = grid.load_config(TEST_CONFIG)
    for run in grid.expand_runs(config):
        write_fake_run(tmp_path / "runs", run)
    archive.pack(config, tmp_path / "runs", tmp_path / "runs.tar")
    return tmp_path / "runs.tar"


def other(now: dict, **versions: str | None) -> dict:
    """`now` with some packages at other versions (None: not installed)."""
    packages = {**now["packages"], **versions}
    return {**now, "packages": {k: v for k, v in packages.items() if v is not None}}


def test_an_archive_records_every_package_python_and_platform(packed):
    recorded = archive.read_environment(packed)
    now = environment.current()
    assert recorded == now
    assert {"torch", "numpy", "pandas", "pyarrow", "snakemake"} <= set(recorded["packages"])
    assert recorded["packages"]["pyarrow"] == "26.0.1"
    with tarfile.open(packed) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("manifest.json").read())
    assert environment.MEMBER in names and environment.MEMBER in manifest["sha256"]


def test_the_same_environment_says_so_and_another_names_what_differs():
    now = environment.current()
    assert environment.describe(now, now).startswith("environment as recorded")
    then = other(now, torch="2.14.1", keras="3.15.1", pillow=None)
    line = environment.describe(then, other(now, torch="2.14.1+cpu", keras=None,
                                            pillow="12.0.0"))
    assert line.startswith("warning: this rebuild runs under another environment")
    assert "3 differ" in line
    assert "torch 2.14.1 -> 2.14.1+cpu" in line
    assert "keras 3.15.1 -> (not installed)" in line
    assert "pillow (not installed) -> 12.0.0" in line
    assert environment.describe(None) == environment.NOT_RECORDED


def test_verify_warns_of_another_environment_and_still_passes(packed, capsys, monkeypatch):
    argv = ["verify", "--config", str(TEST_CONFIG), "--archive", str(packed)]
    assert cli.main(argv) == 0
    assert "environment as recorded" in capsys.readouterr().out
    elsewhere = other(environment.current(), numpy="1.26.4")
    monkeypatch.setattr(environment, "current", lambda: elsewhere)
    assert cli.main(argv) == 0  # a warning, not a refusal
    out = capsys.readouterr().out
    assert "warning: this rebuild runs under another environment" in out
    assert "numpy 2.4.6 -> 1.26.4" in out


def test_an_archive_packed_before_the_record_says_not_recorded(capsys):
    assert archive.read_environment(LAPTOP_ARCHIVE) is None
    assert cli.main(["verify", "--config", str(ROOT / "config" / "laptop_v2.yaml"),
                     "--archive", str(LAPTOP_ARCHIVE)]) == 0
    assert "environment not recorded" in capsys.readouterr().out


def test_the_report_shows_the_environment_line(tmp_path):
    runs = pd.DataFrame({"family": ["main"], "status": ["completed"],
                                           "run_id": ["r"], "record_source": ["trained"]})
    warning = environment.describe(other(environment.current(), numpy="1.0"))
    html = report.status_page(runs, "config.yaml", [], environment_text=warning)
    assert '<p class="mark">warning: this rebuild runs under another environment' in html
    assert "numpy 1.0 -&gt; 2.4.6" in html
    plain = report.status_page(runs, "config.yaml", [], environment_text="environment as x")
    assert "<p>environment as x</p>" in plain


@pytest.mark.parametrize(("member", "error", "message"), [
    (b'{"python": 3}', RecordError, "python is '3'; allowed: a string"),
    (b"[]", RecordError, "an environment record is a JSON object, not list"),
    (b'{"python": "3", "implementation": "C", "platform": "p", "packages": {"a": 1}}',
     RecordError, "package 'a''s version is '1'"),
    (b"[" * 100 + b"]" * 100, InputError, "nested deeper than 64"),
    (b" " * (environment.MAX_BYTES + 1), RecordError, "refused before reading"),
])
def test_a_hostile_environment_member_is_one_clear_error(packed, tmp_path, member, error,
                                                         message):
    crafted = resealed(packed, tmp_path / "crafted.tar", environment_json=member)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        archive.read_environment(crafted)


def test_a_damaged_environment_member_names_it(packed, tmp_path):
    crafted = resealed(packed, tmp_path / "crafted.tar", environment_json=b"{}")
    with tarfile.open(crafted) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    members[environment.MEMBER] = b'{"x": 1}'  # same length class, checksum now wrong
    tar_with(tmp_path / "damaged.tar", members)
    with pytest.raises(RecordError, match="environment.json is damaged"):
        archive.read_environment(tmp_path / "damaged.tar")


# What the laptop study's rebuild writes: its tables, figures, claims and PDF.
REBUILT = ("results/tables", "results/figures", "results/claims", "results/paper/paper.pdf")


def rebuild(clone, cores: int = 2) -> dict[str, str]:
    """The laptop study's tables, figures, claims and PDF rebuilt from its archive in a
    fresh clone, as `make laptop` types it (the clone's own sources, this venv's
    Snakemake); the sha256 of each file."""
    snakemake = shutil.which("snakemake") or str(ROOT / ".venv" / "bin" / "snakemake")
    done = subprocess.run(
        [snakemake, "tables", "figures", "claims", "results/paper/paper.pdf", "--cores",
         str(cores), "--configfile", "config/laptop_v2.yaml", "--config",
         "archive=results/laptop/v2/runs.tar",  # and its rerun, as `make laptop`
         'compare_archives=["results/laptop/v2/rerun/runs.tar"]'],
        cwd=clone, capture_output=True, text=True, timeout=1200,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})  # the clone's src
    assert done.returncode == 0, done.stderr[-4000:]
    sums = {}
    for name in REBUILT:
        path = clone / name
        for file in sorted(path.rglob("*") if path.is_dir() else [path]):
            if file.is_file():
                sums[str(file.relative_to(clone))] = hashlib.sha256(file.read_bytes()
                                                                    ).hexdigest()
    return sums


@pytest.mark.slow
@pytest.mark.latex
def test_the_laptop_study_rebuilds_byte_for_byte_in_two_fresh_clones(tmp_path):
    if shutil.which("latexmk") is None:
        pytest.skip("the PDF needs latexmk")
    sums, seconds = [], []
    for name in ("one", "two"):
        clone = tmp_path / name
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        start = time.monotonic()
        sums.append(rebuild(clone))
        seconds.append(time.monotonic() - start)
    print(f"rebuilds took {seconds[0]:.0f} s and {seconds[1]:.0f} s")
    for name, digest in sums[0].items():
        print(f"{digest}  {name}")
    assert sums[0] == sums[1]
    assert any(n.endswith("paper.pdf") for n in sums[0]) and len(sums[0]) > 20
