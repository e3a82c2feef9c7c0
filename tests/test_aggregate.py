"""Aggregation: one row per expected run (missing ones marked), histories with spec columns."""

import dataclasses
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fakes import fake_history, write_fake_run
from hypothesis import given, settings
from hypothesis import strategies as st

from initmem import cli, vocabulary
from initmem.plan import grid
from initmem.plan.optimizers import OPTIMIZERS, join_hyperparameters, parse_hyperparameters
from initmem.plan.spec import FORMER_FIELDS, Recipe, Run, spec_columns, spec_table
from initmem.records import aggregate
from initmem.records.files import (
    HISTORY_COLUMNS,
    LATER_COLUMNS,
    RECORD_FILES,
    SCHEMA_VERSION,
    RecordError,
    atomic_write_parquet,
    read_records,
    read_sealed,
    sealed,
    summary_columns,
    upgraded,
)
from initmem.records.verify import verify_folders

CONFIG = {
    "optimizers": {"sgd": {"label": "SGD"}, "adam": {"label": "Adam"}},
    "seed_sets": {"two": [0, 1]},
    "sigma_sets": {"two": [0.5, 2.0]},
    "common": {"arch": "resnet9", "b": 32, "epochs": 3, "width": 0.125,
               "dataset": "synthetic", "train_subset": 64},
    "families": {"main": {"grid": {"optimizer": ["sgd", "adam"]},
                          "sigma_w": "two", "seeds": "two"}},
}


@pytest.fixture
def runs():
    return grid.expand_runs(grid.validate_config(CONFIG))  # 2 optimizers x 2 seeds x 2 sigma


def test_missing_runs_are_rows_with_status_missing_and_null_outcomes(tmp_path, runs):
    for run in runs[:5]:
        write_fake_run(tmp_path, run)
    table, epochs = aggregate.aggregate(runs, *aggregate.read_folder_records(tmp_path, runs))
    assert list(table["run_id"]) == [r.run_id for r in runs]
    assert list(table.columns) == list(summary_columns())
    assert list(table["status"]) == ["completed"] * 5 + ["missing"] * 3
    missing = table.iloc[5:]
    assert missing["tau_best"].isna().all() and missing["test_acc_best"].isna().all()
    assert missing["diverged"].isna().all() and missing["record_source"].isna().all()
    # spec columns come from the config even without records
    assert list(missing["optimizer"]) == ["adam"] * 3
    assert list(missing["sigma_w"]) == [2.0, 0.5, 2.0]
    assert epochs.num_rows == 5 * 3


def test_outcomes_are_the_summaries(tmp_path, runs):
    write_fake_run(tmp_path, runs[0])
    table, _ = aggregate.aggregate(runs, *aggregate.read_folder_records(tmp_path, runs))
    _, summary = read_records(tmp_path / runs[0].run_dir)
    row = table.iloc[0]
    # fake history: val_loss 2/e + 0.1 is smallest at the last epoch (3), train_acc >= 0.995
    # never (0.8 at epoch 3); val_acc 0.4 + 0.1 e
    assert row["tau_best"] == 3 and pd.isna(row["tau_interp"])
    assert row["val_acc_best"] == pytest.approx(0.7)
    assert row["test_acc_best"] == summary["test_acc_best"].iloc[0]
    assert row["record_source"] == "generated"


def test_summaries_from_before_data_verification_read_it_as_null(tmp_path, runs):
    write_fake_run(tmp_path, runs[0])
    path = tmp_path / runs[0].run_dir / "summary.parquet"
    old = read_sealed(path, 1, "one run").to_pandas().drop(columns=["data_verification"])
    atomic_write_parquet(old, path)  # a summary as initmem wrote it before the column
    assert read_records(tmp_path / runs[0].run_dir)[1]["data_verification"].isna().all()
    table, _ = aggregate.aggregate(runs, *aggregate.read_folder_records(tmp_path, runs))
    assert table["data_verification"].isna().all() and table["status"].iloc[0] == "completed"


def test_epochs_join_history_rows_with_their_run_spec(tmp_path, runs):
    for run in (runs[0], runs[6]):
        write_fake_run(tmp_path, run)
    _, epochs = aggregate.aggregate(runs, *aggregate.read_folder_records(tmp_path, runs))
    frame = epochs.to_pandas()
    assert list(frame.columns[:len(HISTORY_COLUMNS)]) == list(HISTORY_COLUMNS)
    assert list(frame["run_id"]) == [runs[0].run_id] * 3 + [runs[6].run_id] * 3
    assert list(frame["epoch"]) == [1, 2, 3, 1, 2, 3]
    assert list(frame["optimizer"]) == ["sgd"] * 3 + ["adam"] * 3
    assert list(frame["seed"]) == [runs[0].seed] * 3 + [runs[6].seed] * 3
    assert list(frame["sigma_w"]) == [runs[0].sigma_w] * 3 + [runs[6].sigma_w] * 3
    assert set(frame["record_source"]) == {"generated"}
    assert frame["val_acc"].tolist() == pytest.approx(fake_history(runs[0], 3)["val_acc"].tolist()
                                                      * 2)


def test_records_of_runs_the_config_does_not_expect_are_ignored(tmp_path, runs):
    stale = Run(dataclasses.replace(runs[0].recipe, epochs=7), 0.5, 0)
    write_fake_run(tmp_path, stale)
    write_fake_run(tmp_path, runs[0])
    summaries, histories = aggregate.read_folder_records(tmp_path, runs)
    assert summaries.num_rows == 1
    table, epochs = aggregate.aggregate(runs, *aggregate.read_folder_records(tmp_path, [stale,
                                                                                         *runs]))
    assert stale.run_id not in set(table["run_id"]) and len(table) == len(runs)
    assert set(epochs.column("run_id").to_pylist()) == {runs[0].run_id}


def test_a_record_whose_spec_disagrees_with_the_config_is_an_error(tmp_path, runs):
    other = Run(dataclasses.replace(runs[0].recipe, cosine_alpha=0.5), runs[0].sigma_w,
                runs[0].seed)
    assert other.run_dir == runs[0].run_dir  # the path does not show cosine_alpha
    write_fake_run(tmp_path, other)
    with pytest.raises(RecordError, match=r"has cosine_alpha=0\.5 but the config says 0\.01"):
        aggregate.aggregate(runs, *aggregate.read_folder_records(tmp_path, runs))


def test_a_summary_without_its_history_is_an_error(tmp_path, runs):
    write_fake_run(tmp_path, runs[0])
    (tmp_path / runs[0].run_dir / "history.parquet").unlink()
    with pytest.raises(RecordError, match="history.parquet: missing"):
        aggregate.read_folder_records(tmp_path, runs)


def test_a_truncated_record_is_an_error_naming_the_file(tmp_path, runs):
    write_fake_run(tmp_path, runs[0])
    path = tmp_path / runs[0].run_dir / "summary.parquet"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(RecordError, match="summary.parquet: unreadable"):
        aggregate.read_folder_records(tmp_path, runs)


def test_no_records_at_all_gives_every_run_missing(tmp_path, runs):
    table, epochs = aggregate.aggregate(runs, *aggregate.read_folder_records(tmp_path, runs))
    assert (table["status"] == "missing").all() and epochs.num_rows == 0
    assert epochs.column_names[:len(HISTORY_COLUMNS)] == list(HISTORY_COLUMNS)


def test_cli_writes_both_tables(tmp_path, runs):
    import yaml

    (tmp_path / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    write_fake_run(tmp_path / "runs", runs[1])
    out = tmp_path / "agg"
    assert cli.main(["aggregate", "--config", str(tmp_path / "config.yaml"), "--records",
                     str(tmp_path / "runs"), "--runs", str(out / "runs.parquet"),
                     "--epochs", str(out / "epochs.parquet")]) == 0
    table = pd.read_parquet(out / "runs.parquet")
    assert table["status"].value_counts().to_dict() == {"missing": 7, "completed": 1}
    assert pq.read_table(out / "epochs.parquet").num_rows == 3


def test_spec_columns_follow_the_recipe():
    fields = [f.name for f in dataclasses.fields(Recipe)]
    assert list(spec_columns()) == ["run_id", *fields, "sigma_w", "seed"]


# The columns schema 4 added (the others of LATER_COLUMNS came with schema 3)
SCHEMA_4_COLUMNS = ("host", "slurm_job_id", "resumed_from_epoch")


def as_written_by_schema(version: int, run_dir: Path) -> None:
    """Rewrite a run's records as an initmem of an older record schema wrote them:
    without the LATER_COLUMNS it lacked, its momentum and decays as the recipe fields they
    were (FORMER_FIELDS; muon_adam_weight_decay from schema 4), with its schema_version."""
    lacked = {3: SCHEMA_4_COLUMNS, 4: ()}.get(version, LATER_COLUMNS)
    for name in RECORD_FILES:
        table = pq.read_table(run_dir / name).replace_schema_metadata(None)
        table = table.drop_columns([c for c in lacked if c in table.column_names])
        if "hyperparameters" in table.column_names:
            table = with_former_fields(table, version)
        if "schema_version" in table.column_names:
            at = table.column_names.index("schema_version")
            table = table.set_column(at, "schema_version", pa.array([version]))
        pq.write_table(sealed(table), run_dir / name)


def with_former_fields(summary: pa.Table, version: int) -> pa.Table:
    """A summary's momentum and decays moved out of its hyperparameters into the columns
    of the recipe fields they were before schema 5."""
    settings = parse_hyperparameters(summary["hyperparameters"][0].as_py())
    former = {name: settings.pop(key, unset) for name, (unset, key) in FORMER_FIELDS.items()
              if version == 4 or name != "muon_adam_weight_decay"}
    summary = summary.drop_columns(["hyperparameters"])
    for name, value in {**former, "hyperparameters": join_hyperparameters(settings)}.items():
        summary = summary.append_column(name, pa.array([value], pa.float64()
                                                       if name in former else pa.string()))
    return summary


@pytest.mark.parametrize("version", [2, 3, 4])
def test_records_of_each_older_schema_read_as_the_runs_they_recorded(tmp_path, version):
    """Momentum SGD at its default (nothing to store) and with decay, AdamW, and from
    schema 4 (which had muon_adam_weight_decay) Muon in both readings of its decay, written
    by the initmem of each schema, read back, one folder or many, with the same spec."""
    base = dict(family="main", arch="resnet9", b=32, epochs=3, width=0.125,
                dataset="synthetic", train_subset=64)
    recipes = [Recipe(optimizer="sgd_momentum", **base),
               Recipe(optimizer="sgd_momentum", hyperparameters={"weight_decay": 1e-3}, **base),
               Recipe(optimizer="adamw", hyperparameters={"weight_decay": 1e-4}, **base)]
    if version == 4:
        recipes += [Recipe(optimizer="muon", **base, hyperparameters={
            "weight_decay": 1e-4, "adam_weight_decay": awd}) for awd in (None, 0.004)]
    runs = [Run(recipe, 0.5, seed) for seed, recipe in enumerate(recipes)]
    for run in runs:
        write_fake_run(tmp_path, run)
        as_written_by_schema(version, tmp_path / run.run_dir)
        written = pq.read_table(tmp_path / run.run_dir / "summary.parquet")
        assert "weight_decay" in written.schema.names
        summary = read_records(tmp_path / run.run_dir)[1]
        assert not set(FORMER_FIELDS) & set(summary.columns)
        assert summary["hyperparameters"].astype(object).where(
            summary["hyperparameters"].notna(), None).tolist() == [run.recipe.hyperparameters]
    summaries, _ = aggregate.read_folder_records(tmp_path, runs)
    typed = aggregate.typed_summaries(summaries)
    assert typed["hyperparameters"].astype(object).where(
        typed["hyperparameters"].notna(), None).tolist() == [r.hyperparameters for r in recipes]
    assert not aggregate.spec_mismatches(spec_table(runs), typed)


ANY_VALUE = (st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats()
             | st.text(max_size=8)
             | st.sampled_from([0.0, 0.9, 1e-4, 0.004]))


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(row=st.fixed_dictionaries({
    "run_id": st.text(max_size=8), "optimizer": st.sampled_from(OPTIMIZERS) | ANY_VALUE,
    "hyperparameters": st.none() | st.text(max_size=12)
    | st.sampled_from(["beta_2=0.99", "momentum=0.5", "ns_steps=6.0"]),
    "momentum": ANY_VALUE, "weight_decay": ANY_VALUE, "muon_adam_weight_decay": ANY_VALUE}))
def test_any_former_fields_of_a_record_move_in_or_are_refused_in_one_line(row):
    """Whatever an old summary (a stranger's, sealed again) holds in its former columns,
    the upgrade reads it into hyperparameters text or refuses it with a RecordError."""
    try:
        table = upgraded(pa.Table.from_pylist([row]), summary_columns())
    except RecordError as err:
        assert "\n" not in str(err) and "make no valid hyperparameters" in str(err)
        return
    assert not set(FORMER_FIELDS) & set(table.column_names)
    assert table["hyperparameters"].type == pa.string()


def test_records_of_schema_2_read_aggregate_and_verify_with_nan_later_columns(tmp_path, runs):
    for run in runs[:2]:
        write_fake_run(tmp_path, run)
    as_written_by_schema(2, tmp_path / runs[0].run_dir)
    history, summary = read_records(tmp_path / runs[0].run_dir)
    assert summary["schema_version"].iloc[0] == 2 and len(history) == 3
    assert history["bn_var_ratio"].isna().all() and summary["bn_var_ratio_best"].isna().all()
    assert {f.state for f in verify_folders(tmp_path, runs[:2])} == {"good"}
    for expected in (runs[:1], runs[:2]):  # old records alone, and beside new ones
        table, epochs = aggregate.aggregate(
            runs, *aggregate.read_folder_records(tmp_path, expected))
        old_and_new = [True, False][:len(expected)]
        assert table["bn_var_ratio_best"].isna().tolist()[:len(expected)] == old_and_new
        ratios = epochs.to_pandas().groupby("run_id", sort=False)["bn_var_ratio"]
        assert [r.isna().all() for _, r in ratios] == old_and_new


def test_records_of_schema_3_read_aggregate_and_verify_with_null_provenance(tmp_path, runs):
    """Before host, slurm_job_id and resumed_from_epoch: null (not recorded), beside new
    records that carry them."""
    for run in runs[:2]:
        write_fake_run(tmp_path, run, host="imnode1", slurm_job_id="12", resumed_from_epoch=2)
    as_written_by_schema(3, tmp_path / runs[0].run_dir)
    _, summary = read_records(tmp_path / runs[0].run_dir)
    assert summary["schema_version"].iloc[0] == 3
    assert summary[list(SCHEMA_4_COLUMNS)].isna().all().all()
    assert summary["bn_var_ratio_best"].notna().all()  # schema 3 had it
    assert {f.state for f in verify_folders(tmp_path, runs[:2])} == {"good"}
    table, _ = aggregate.aggregate(runs, *aggregate.read_folder_records(tmp_path, runs[:2]))
    provenance = table[list(SCHEMA_4_COLUMNS)].head(2).astype(object)
    assert provenance.where(provenance.notna(), None).values.tolist() == [
        [None, None, None], ["imnode1", "12", 2]]
    assert [str(table[c].dtype) for c in SCHEMA_4_COLUMNS] == ["string", "string", "Int64"]


def test_records_of_an_unknown_schema_are_refused(tmp_path, runs):
    write_fake_run(tmp_path, runs[0])
    as_written_by_schema(1, tmp_path / runs[0].run_dir)
    with pytest.raises(RecordError, match="schema_version 1; this initmem reads 2 to "
                                          f"{SCHEMA_VERSION}$"):
        read_records(tmp_path / runs[0].run_dir)


@pytest.mark.parametrize("dtype", [object, "string"])
def test_missing_and_generated_are_one_predicate_each(dtype):
    """What every stage asks of a runs table: the aggregate's "missing", a hand-made None
    or NA all mean no record; only "generated" marks a synthetic record."""
    runs = pd.DataFrame({"status": ["completed", "missing", None, pd.NA],
                         "record_source": ["trained", None, "generated", pd.NA]}).astype(dtype)
    assert vocabulary.missing(runs).tolist() == [False, True, True, True]
    assert vocabulary.generated(runs).tolist() == [False, False, True, False]
