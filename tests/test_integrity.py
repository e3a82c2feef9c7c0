"""Records that cannot lie: a damaged byte of a record file or an archive is an error
naming the file, never a changed number or a silently missing run."""

import copy
import tarfile

import pandas as pd
import pyarrow as pa
import pytest
from byte_flips import flip, flip_outcomes
from fakes import write_fake_run
from workflow_helpers import TEST_CONFIG

from initmem.plan import grid
from initmem.records import aggregate, archive
from initmem.records.files import RecordError, content_digest, read_records


@pytest.fixture(scope="module")
def config():
    return grid.load_config(TEST_CONFIG)


@pytest.fixture
def run_dir(tmp_path, config):
    run = grid.expand_runs(config)[0]
    write_fake_run(tmp_path, run)
    return tmp_path / run.run_dir


def flipped(path, position: int) -> bytes:
    """The file's bytes with one byte changed at `position` (restored by the caller)."""
    data = path.read_bytes()
    path.write_bytes(flip(data, position))
    return data


def flips_are_caught_or_harmless(kind: str, path, positions: range) -> int:
    """How many flips were caught, after checking that each one either raised RecordError
    naming the file or read exactly the original records (the byte was padding or a
    statistic nothing reads)."""
    outcomes = flip_outcomes(kind, path, [(p, 0x5A) for p in positions])
    wrong = {p: o for p, o in zip(positions, outcomes, strict=True)
             if o[0] not in ("caught", "harmless")}
    assert not wrong, f"{len(wrong)} flipped byte(s) of {path.name}: {wrong}"
    return sum(o[0] == "caught" for o in outcomes)


@pytest.mark.parametrize("name", ["history.parquet", "summary.parquet"])
def test_every_byte_flip_of_a_record_file_is_caught_or_harmless(run_dir, name):
    path = run_dir / name
    size = path.stat().st_size
    positions = range(0, size, max(1, size // 500))  # 500 positions, all regions
    assert flips_are_caught_or_harmless("run", path, positions) > 0.5 * len(positions)


def test_a_damaged_value_names_the_file_and_the_fix(run_dir):
    """A value changed with the file still valid Parquet: only the checksum sees it."""
    path = run_dir / "history.parquet"
    table = pa.parquet.read_table(path)
    column = table.column("val_acc").to_pylist()
    column[0] += 0.01
    damaged = table.set_column(table.schema.get_field_index("val_acc"), "val_acc",
                               pa.array(column))
    pa.parquet.write_table(damaged, path)  # keeps the old digest in the metadata
    with pytest.raises(RecordError, match="damaged.*retrain the run"):
        read_records(run_dir)


def test_a_record_without_checksum_is_refused(run_dir):
    path = run_dir / "summary.parquet"
    table = pa.parquet.read_table(path)
    pa.parquet.write_table(table.replace_schema_metadata(None), path)
    with pytest.raises(RecordError, match="no initmem checksum"):
        read_records(run_dir)


def test_aggregation_lists_every_damaged_run(tmp_path, config):
    runs = grid.expand_runs(config)
    for run in runs:
        write_fake_run(tmp_path, run)
    for run in runs[:2]:
        flipped(tmp_path / run.run_dir / "history.parquet", 60)
    with pytest.raises(RecordError, match="2 run\\(s\\) have damaged records") as err:
        aggregate.read_folder_records(tmp_path, runs)
    for run in runs[:2]:
        assert str(tmp_path / run.run_dir / "history.parquet") in str(err.value)


def of_3_epochs(config: dict) -> dict:
    """The config with runs of 3 epochs (a history longer than its runs' epochs is
    refused unread): more history bytes to damage."""
    config = copy.deepcopy(config)
    config["families"]["main"]["recipe"]["epochs"] = 3
    return config


@pytest.mark.slow
def test_every_byte_flip_of_an_archive_is_caught_or_harmless(tmp_path, config):
    config = of_3_epochs(config)
    runs = grid.expand_runs(config)
    for run in runs:
        write_fake_run(tmp_path / "runs", run)
    path = tmp_path / "runs.tar"
    archive.pack(config, tmp_path / "runs", path)
    size = path.stat().st_size
    assert flips_are_caught_or_harmless("archive", path, range(0, size, max(1, size // 800)))


def test_a_damaged_tar_header_says_the_archive_is_damaged(tmp_path, config):
    """tar takes a header that fails its checksum for the archive's end, so the members
    after it vanish: the message must say damaged, never that a member is absent."""
    config = of_3_epochs(config)
    runs = grid.expand_runs(config)
    for run in runs:
        write_fake_run(tmp_path / "runs", run)
    path = tmp_path / "runs.tar"
    archive.pack(config, tmp_path / "runs", path)
    with tarfile.open(path) as tar:
        headers = {m.name: m.offset for m in tar.getmembers()}
    for name in ("summary.parquet", "history.parquet"):
        for position in range(headers[name], headers[name] + 512, 8):
            data = flipped(path, position)
            try:
                archive.read_archive(path)
            except RecordError as err:
                assert "damaged" in str(err) and str(path) in str(err), (position, err)
            finally:
                path.write_bytes(data)
    flipped(path, headers["history.parquet"])  # the member name's first byte
    with pytest.raises(RecordError, match="member history.parquet cannot be read"):
        archive.read_archive(path)


def test_the_digest_is_of_the_content_not_the_encoding():
    frame = pd.DataFrame({"a": [1.0, None], "s": pd.array(["x", None], dtype="string")})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    rechunked = pa.concat_tables([table.slice(0, 1), table.slice(1)])
    assert content_digest(table) == content_digest(rechunked)
    large = pa.schema([("a", pa.float64()), ("s", pa.large_string())],
                      metadata=table.schema.metadata)
    assert content_digest(table) == content_digest(table.cast(large))
    changed = pa.Table.from_pandas(frame.assign(a=[1.0, 2.0]), preserve_index=False)
    assert content_digest(changed) != content_digest(table)
