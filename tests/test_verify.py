"""`initmem verify`: every run of a config is good, missing, damaged or stale, in run
folders and in an archive."""

import dataclasses

import pyarrow as pa
import pytest
from fakes import write_fake_run
from workflow_helpers import TEST_CONFIG

from initmem import cli
from initmem.plan import grid
from initmem.records import archive, files
from initmem.records.verify import verify_archive, verify_folders


@pytest.fixture(scope="module")
def config():
    return grid.load_config(TEST_CONFIG)


def states(findings) -> dict[str, str]:
    return {f.where: f.state for f in findings}


def test_run_folders_good_missing_damaged_and_stale(tmp_path, config, capsys):
    runs = grid.expand_runs(config)
    good, damaged, stale, missing = runs
    for run in (good, damaged):
        write_fake_run(tmp_path, run)
    (tmp_path / damaged.run_dir / "summary.parquet").write_bytes(b"PAR1 not parquet")
    other = dataclasses.replace(stale.recipe, cosine_alpha=0.5)  # its path does not show it
    write_fake_run(tmp_path, dataclasses.replace(stale, recipe=other))
    stray = dataclasses.replace(good, seed=7)
    write_fake_run(tmp_path, stray)
    assert states(verify_folders(tmp_path, runs)) == {
        good.run_id: "good", damaged.run_id: "damaged", stale.run_id: "stale",
        missing.run_id: "missing", stray.run_dir: "stale"}
    code = cli.main(["verify", "--config", str(TEST_CONFIG), "--records", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and out.splitlines()[-1] == "1 good, 1 missing, 1 damaged, 2 stale"
    assert str(tmp_path / damaged.run_dir / "summary.parquet") in out
    assert "cosine_alpha=0.5" in out


def test_an_archive_good_missing_and_damaged(tmp_path, config, capsys):
    runs = grid.expand_runs(config)
    for run in runs[:3]:
        write_fake_run(tmp_path / "runs", run)
    path = tmp_path / "runs.tar"
    archive.pack(config, tmp_path / "runs", path)
    assert sorted(states(verify_archive(path, runs)).values()) == ["good"] * 3 + ["missing"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x5A  # inside a Parquet member
    path.write_bytes(bytes(data))
    assert states(verify_archive(path, runs)) == {str(path): "damaged"}
    code = cli.main(["verify", "--config", str(TEST_CONFIG), "--archive", str(path)])
    assert code == 1 and "0 good, 0 missing, 1 damaged" in capsys.readouterr().out


def test_one_line_per_run_whatever_the_error_text(tmp_path, config, capsys, monkeypatch):
    """arrow's messages can hold newlines; verify's report stays one line per run."""
    runs = grid.expand_runs(config)
    for run in runs:
        write_fake_run(tmp_path, run)
    bad = tmp_path / runs[1].run_dir / "history.parquet"
    read_bytes = files.read_bytes

    def arrow_error(path, *args, **kwargs):
        if path == bad:
            raise pa.ArrowInvalid("deserialize thrift:\nTProtocolException: Invalid data\n")
        return read_bytes(path, *args, **kwargs)

    monkeypatch.setattr(files, "read_bytes", arrow_error)
    code = cli.main(["verify", "--config", str(TEST_CONFIG), "--records", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1 and lines[-1] == "3 good, 0 missing, 1 damaged, 0 stale", lines
    assert len(lines) == 2 and lines[0].startswith(f"damaged  {runs[1].run_id}: {bad}")
    assert "unreadable (deserialize thrift: TProtocolException: Invalid data" in lines[0]
