"""TensorBoard event files, written live by `initmem train --tensorboard` and from records
or an archive by `initmem tensorboard`, read back with TensorBoard's own reader: every
scalar equals its history value (in float32, as TensorBoard keeps scalars) exactly, and
every run carries its spec as HParams."""

from pathlib import Path

import pandas as pd
import pytest
import stopping
from workflow_helpers import TEST_CONFIG

from initmem import cli
from initmem.plan import grid
from initmem.records import archive, tensorboard
from initmem.records.files import read_records

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing import event_accumulator  # noqa: E402
from tensorboard.plugins.hparams import plugin_data_pb2  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402


def read_events(folder: Path) -> tuple[pd.DataFrame, dict]:
    """A TensorBoard run's scalars as a history frame (epoch = step), and its HParams."""
    acc = event_accumulator.EventAccumulator(
        str(folder), size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    columns = {tag: {e.step: tensor_util.make_ndarray(e.tensor_proto)[()]
                     for e in acc.Tensors(tag)} for tag in acc.Tags()["tensors"]
               if tag in tensorboard.SCALARS}
    frame = pd.DataFrame(columns).rename_axis("epoch").reset_index()
    content = acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    info = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    values = {name: getattr(v, v.WhichOneof("kind")) for name, v in info.hparams.items()}
    return frame, values


def assert_events_equal(tb: Path, run_id: str, history: pd.DataFrame, spec: dict) -> None:
    frame, values = read_events(tb / run_id.replace(":", "/"))
    expected = history[["epoch", *tensorboard.SCALARS]].reset_index(drop=True)
    expected[tensorboard.SCALARS] = expected[tensorboard.SCALARS].astype("float32")
    if expected.empty:  # diverged in its first epoch: HParams, no scalars
        assert frame.empty
    else:
        pd.testing.assert_frame_equal(frame[expected.columns], expected, check_exact=True,
                                      check_dtype=False)
    assert values == pytest.approx(tensorboard.hparams(spec))
    assert values["sigma_w"] == spec["sigma_w"] and values["optimizer"] == spec["optimizer"]


@pytest.mark.slow
def test_live_event_files_equal_the_records(tmp_path):
    """The diverging pack: a run that diverges, runs that go on after it left the pack."""
    spec, out, tb = tmp_path / "pack.json", tmp_path / "out", tmp_path / "tb"
    stopping.DIVERGING.dump(spec)
    assert cli.main(["train", str(spec), str(out), "--device", "cpu", "--no-progress",
                     "--tensorboard", str(tb)]) == 0
    lengths = []
    for run in stopping.DIVERGING.runs:
        history, _ = read_records(out / run.run_dir)
        assert_events_equal(tb, run.run_id, history, run.as_row())
        lengths.append(len(history))
    assert lengths == [4, 4, 0, 4]


def test_event_files_from_records_and_an_archive_equal_them(tmp_path):
    records, tar = tmp_path / "runs", tmp_path / "runs.tar"
    assert cli.main(["synthetic-records", "--config", str(TEST_CONFIG), "--out-dir",
                     str(tmp_path / "aggregate"), "--records-dir", str(records)]) == 0
    archive.pack(grid.load_config(TEST_CONFIG), records, tar)
    summaries, histories = (t.to_pandas() for t in archive.read_archive(tar))
    for source in (records, tar):
        tb = tmp_path / f"tb-{source.name}"
        assert cli.main(["tensorboard", str(source), str(tb)]) == 0
        for spec in summaries.to_dict("records"):
            history = histories[histories["run_id"] == spec["run_id"]]
            assert_events_equal(tb, spec["run_id"], history, spec)
    assert len(summaries) == 4


def test_a_folder_without_records_is_one_line(tmp_path, capsys):
    assert cli.main(["tensorboard", str(tmp_path), str(tmp_path / "tb")]) == 2
    assert "no run records (summary.parquet) under it" in capsys.readouterr().err


def test_hparams_skip_nulls_and_fields_older_records_lack():
    """The laptop study's archive predates best_test_subset; nulls are no HParam."""
    spec = stopping.DIVERGING.runs[0].as_row()
    del spec["best_test_subset"]
    got = tensorboard.hparams({**spec, "patience": pd.NA, "train_subset": float("nan")})
    assert "best_test_subset" not in got and "patience" not in got
    assert "train_subset" not in got and got["sigma_w"] == 1.0 and got["b"] == 32
