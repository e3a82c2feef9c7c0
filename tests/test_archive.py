"""Raw-runs archive: pack, read back, unpack; a figure rebuilt from it without training."""

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from fakes import write_fake_run
from workflow_helpers import TEST_CONFIG, job_counts, snakemake

from initmem import cli
from initmem.plan import grid
from initmem.records import aggregate, archive
from initmem.records.files import RecordError, read_records


@pytest.fixture
def config():
    return grid.load_config(TEST_CONFIG)


@pytest.fixture
def records(tmp_path, config):
    """Fake records of every run of the test config but the last."""
    runs = grid.expand_runs(config)
    for run in runs[:-1]:
        write_fake_run(tmp_path / "runs", run)
    return tmp_path / "runs"


def test_pack_then_read_gives_the_records(tmp_path, config, records):
    manifest = archive.pack(config, records, tmp_path / "runs.tar")
    assert (manifest["runs"], manifest["expected_runs"]) == (3, 4)
    assert manifest["config"] == grid.experiment_config(config)
    runs = grid.expand_runs(config)
    from_archive = aggregate.aggregate(runs, *archive.read_archive(tmp_path / "runs.tar"))
    from_folders = aggregate.aggregate(runs, *aggregate.read_folder_records(records, runs))
    pd.testing.assert_frame_equal(from_archive[0], from_folders[0])
    assert from_archive[1].equals(from_folders[1])
    assert list(from_archive[0]["status"]) == ["completed"] * 3 + ["missing"]


def test_unpack_writes_the_same_record_files(tmp_path, config, records):
    archive.pack(config, records, tmp_path / "runs.tar")
    assert archive.unpack(tmp_path / "runs.tar", tmp_path / "back") == 3
    for run in grid.expand_runs(config)[:-1]:
        history, summary = read_records(tmp_path / "back" / run.run_dir)
        history0, summary0 = read_records(records / run.run_dir)
        pd.testing.assert_frame_equal(history, history0)
        pd.testing.assert_frame_equal(summary, summary0)


def test_a_staged_studys_archive_expects_only_the_runs_its_looks_asked_for(
        tmp_path, config, records, capsys):
    """The first two runs asked for, one of them recorded... of the four planned: the other
    two were never needed, so neither the archive nor the aggregate counts them missing."""
    runs = grid.expand_runs(config)
    listed = tmp_path / "asked.txt"
    listed.write_text(f"{runs[0].run_id}\n{runs[1].run_id}\n")
    assert cli.main(["archive", "pack", "--config", str(TEST_CONFIG), "--records",
                     str(records), "--expected", str(listed), "--out",
                     str(tmp_path / "runs.tar")]) == 0
    assert "2 of 2 expected runs" in capsys.readouterr().out
    assert [r.run_id for r in archive.archive_runs(config, tmp_path / "runs.tar")] == [
        runs[0].run_id, runs[1].run_id]
    table, _ = aggregate.tables_from_archive(TEST_CONFIG, tmp_path / "runs.tar")
    assert list(table["status"]) == ["completed", "completed"]
    for source in (["--records", str(records), "--expected", str(listed)],
                   ["--archive", str(tmp_path / "runs.tar")]):
        assert cli.main(["aggregate", "--config", str(TEST_CONFIG), *source, "--runs",
                         str(tmp_path / "r.parquet"), "--epochs",
                         str(tmp_path / "e.parquet")]) == 0
        assert "2 expected runs: 2 completed" in capsys.readouterr().out
    # a fixed study's archive expects every run of its config
    archive.pack(config, records, tmp_path / "fixed.tar")
    assert archive.archive_runs(config, tmp_path / "fixed.tar") == runs


def test_a_listed_run_id_the_config_lacks_is_an_error_naming_it(tmp_path, config, records,
                                                                  capsys):
    listed = tmp_path / "runs.txt"
    listed.write_text("main:nothing-like-it\n")
    assert cli.main(["aggregate", "--config", str(TEST_CONFIG), "--records", str(records),
                     "--expected", str(listed), "--runs", str(tmp_path / "r.parquet"),
                     "--epochs", str(tmp_path / "e.parquet")]) == 2
    err = capsys.readouterr().err
    assert "1 of its run ids are not runs of the config, the first 'main:nothing-like-it'" \
        in err and not (tmp_path / "r.parquet").exists()
    listed.unlink()
    listed.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RecordError, match="list of run ids"):
        archive.read_listed(listed)


def sealed_manifest() -> dict:
    manifest = {"format": archive.FORMAT, "schema_version": 2, "sha256": {}}
    return {**manifest, "manifest_sha256": archive._manifest_digest(manifest)}


def tar_with(path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize(("members", "message"), [
    ({}, "not a runs archive \\(it has no manifest.json\\)"),
    ({"manifest.json": b'{"format": "zip"}'}, "not a runs archive"),
    ({"manifest.json": json.dumps({"format": archive.FORMAT, "schema_version": 0}).encode()},
     "schema_version 0"),
    ({"manifest.json": json.dumps({"format": archive.FORMAT, "schema_version": 2}).encode()},
     "manifest.json is damaged"),
    ({"manifest.json": json.dumps(sealed_manifest()).encode()},
     "damaged or incomplete runs archive: member summary.parquet cannot be read"),
])
def test_a_bad_archive_says_what_is_wrong(tmp_path, members, message):
    tar_with(tmp_path / "bad.tar", members)
    with pytest.raises(RecordError, match=message):
        archive.read_archive(tmp_path / "bad.tar")


def test_a_file_that_is_no_tar_is_an_error(tmp_path):
    (tmp_path / "x.tar").write_text("hello")
    with pytest.raises(RecordError, match="unreadable runs archive"):
        archive.read_archive(tmp_path / "x.tar")


@pytest.mark.slow
def test_workflow_archive_then_rebuild_a_figure_without_training(tmp_path, config):
    made = tmp_path / "made"
    for run in grid.expand_runs(config):
        write_fake_run(made / "results" / "runs", run)
    done = snakemake(made, TEST_CONFIG, "archive")
    assert done.returncode == 0, done.stdout + done.stderr
    tar = made / "results" / "archive" / "runs.tar"
    assert not any(rule.startswith("train_") for rule in job_counts(done.stderr))

    fresh = tmp_path / "fresh"  # a reviewer's checkout: no run records at all
    fresh.mkdir()
    done = snakemake(fresh, TEST_CONFIG, "results/figures/fig2.pdf",
                     "results/aggregate/runs.parquet", "--config", f"archive={tar}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(job_counts(done.stderr)) == {"write_config", "aggregate_runs", "draw_figure",
                                            "total"}
    assert not (fresh / "results" / "runs").exists()
    assert (fresh / "results" / "figures" / "fig2.pdf").stat().st_size > 0
    rebuilt = pd.read_parquet(fresh / "results" / "aggregate" / "runs.parquet")
    assert (rebuilt["status"] == "completed").all() and len(rebuilt) == 4
    assert yaml.safe_load((fresh / "results" / "config.yaml").read_text()) == \
        grid.experiment_config(config)


def test_archive_config_prints_the_config_it_was_made_from(tmp_path, config, records, capsys):
    archive.pack(config, records, tmp_path / "runs.tar")
    assert cli.main(["archive", "config", str(tmp_path / "runs.tar")]) == 0
    # marked: its display strings are data, rendered as text (tests/test_hostile_text.py)
    assert yaml.safe_load(capsys.readouterr().out) == \
        {**grid.experiment_config(config), "from_archive": True}


def test_archive_config_out_writes_only_what_it_read(tmp_path, config, records):
    archive.pack(config, records, tmp_path / "runs.tar")
    assert cli.main(["archive", "config", str(tmp_path / "runs.tar"), "--out",
                     str(tmp_path / "archived.yaml")]) == 0
    assert yaml.safe_load((tmp_path / "archived.yaml").read_text()) == \
        {**grid.experiment_config(config), "from_archive": True}
    assert cli.main(["archive", "config", str(tmp_path / "absent.tar"), "--out",
                     str(tmp_path / "bad.yaml")]) != 0
    assert not (tmp_path / "bad.yaml").exists()


def test_aggregating_an_archive_of_another_config_warns(tmp_path, config, records, capsys):
    archive.pack(config, records, tmp_path / "runs.tar")
    other = yaml.safe_load(TEST_CONFIG.read_text())
    other["sigma_sets"]["two"] = [0.5, 1.0]
    for name, cfg in [("same.yaml", yaml.safe_load(TEST_CONFIG.read_text())),
                      ("other.yaml", other)]:
        (tmp_path / name).write_text(yaml.safe_dump(cfg))
        assert cli.main(["aggregate", "--config", str(tmp_path / name), "--archive",
                         str(tmp_path / "runs.tar"), "--runs", str(tmp_path / "r.parquet"),
                         "--epochs", str(tmp_path / "e.parquet")]) == 0
        warned = "was made from another config" in capsys.readouterr().err
        assert warned == (name == "other.yaml")
        table = pd.read_parquet(tmp_path / "r.parquet")
        assert (table["status"] == "completed").sum() == (3 if name == "same.yaml" else 2)


def resealed(path: Path, out: Path, **members: bytes) -> Path:
    """The archive at `path` with members replaced (name: bytes, dots as underscores),
    every checksum of its manifest made right again, as a stranger's tool could."""
    with tarfile.open(path) as tar:
        found = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    found.update({name.replace("_", "."): data for name, data in members.items()})
    manifest = json.loads(found["manifest.json"])
    manifest["sha256"] = {name: archive._sha256(data) for name, data in found.items()
                          if name != "manifest.json"}
    manifest["manifest_sha256"] = archive._manifest_digest(manifest)
    tar_with(out, {**found, "manifest.json": json.dumps(manifest).encode()})
    return out


def parquet_of(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


MILLION_ROWS = parquet_of(pa.table({"epoch": pa.array(np.ones(10**6, dtype=np.int64))}))


@pytest.mark.parametrize(("members", "reason"), [
    ({"history_parquet": MILLION_ROWS},
     "history.parquet: declares 1000000 rows, at most 3 expected (the summaries' epochs)"),
    ({"summary_parquet": MILLION_ROWS},
     "summary.parquet: declares 1000000 rows, at most "),  # its bytes // MIN_ROW_BYTES
    ({"summary_parquet": parquet_of(pa.table({"device": ["x" * 100_000]}))},
     "summary.parquet: declares 100"),
], ids=["history-rows", "summary-rows", "summary-bytes"])
def test_an_archive_declaring_too_much_is_refused_before_reading(
        tmp_path, config, records, capsys, monkeypatch, members, reason):
    """A few kilobytes of Parquet declaring a million rows (the real attack: 3 MB for 400
    million, 5.7 GB read): one line from its metadata, no data read, nothing written."""
    archive.pack(config, records, tmp_path / "runs.tar")
    crafted = resealed(tmp_path / "runs.tar", tmp_path / "crafted.tar", **members)
    assert crafted.stat().st_size < 100_000

    read = pq.ParquetFile.read

    def read_small(parquet: pq.ParquetFile, *args, **kwargs):
        assert parquet.metadata.num_rows < 10**6, "data read before the metadata was checked"
        return read(parquet, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", read_small)
    code = cli.main(["archive", "unpack", str(crafted), "--out", str(tmp_path / "back")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"{crafted}:{reason}" in err and "refused before reading" in err, err
    assert not (tmp_path / "back").exists()


def test_a_run_folder_with_more_history_rows_than_epochs_is_refused(tmp_path, config):
    run = grid.expand_runs(config)[0]
    write_fake_run(tmp_path, run)
    (tmp_path / run.run_dir / "history.parquet").write_bytes(MILLION_ROWS)
    with pytest.raises(RecordError, match=f"history.parquet: declares 1000000 rows, at most "
                                          f"{run.recipe.epochs} expected \\(its summary's"):
        read_records(tmp_path / run.run_dir)


def test_a_manifest_nested_100000_deep_is_one_line(tmp_path, capsys):
    tar_with(tmp_path / "deep.tar", {"manifest.json": b"[" * 100_000 + b"]" * 100_000})
    code = cli.main(["archive", "unpack", str(tmp_path / "deep.tar"), "--out",
                     str(tmp_path / "back")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"{tmp_path / 'deep.tar'}:manifest.json: JSON nested deeper than 64 levels" in err
