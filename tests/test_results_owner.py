"""results/ holds one config's outputs at a time (initmem results, asked by make)."""

from pathlib import Path

import pytest
import yaml
from workflow_helpers import TEST_CONFIG

from initmem.cli import main
from initmem.errors import InputError
from initmem.plan import grid, results

DEMO = Path(__file__).parents[1] / "config" / "demo.yaml"


def written(root: Path, config: Path) -> None:
    """results/config.yaml as the workflow writes it (the experiment part)."""
    root.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(grid.experiment_config(grid.load_config(config)), sort_keys=False)
    (root / "config.yaml").write_text(text)


def test_empty_results_and_the_same_config_are_fine(tmp_path):
    assert "no config's outputs yet" in results.check(TEST_CONFIG, tmp_path / "results")
    written(tmp_path / "results", TEST_CONFIG)
    assert results.check(TEST_CONFIG, tmp_path / "results").endswith("outputs")


def test_another_configs_results_are_refused_in_one_line(tmp_path, capsys):
    written(tmp_path / "results", DEMO)
    with pytest.raises(InputError, match="holds the outputs of another config than"):
        results.check(TEST_CONFIG, tmp_path / "results")
    assert main(["results", "--config", str(TEST_CONFIG), "--root",
                 str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "run `make clean` first" in err
