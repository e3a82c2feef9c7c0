"""The table and figure declarations (initmem.plan.artifacts), and every table of every
shipped config rendered from its synthetic records: rows only for planned cells, rules only
between groups present."""

import copy
import re
from pathlib import Path

import pytest
import yaml

from initmem.analysis import tables
from initmem.analysis.tables import cells
from initmem.errors import InputError
from initmem.plan import artifacts, grid, roles
from initmem.records import synthetic

ROOT = Path(__file__).parents[1]
SHIPPED = ["config/lion.yaml", "config/resnet20.yaml", "config/demo.yaml",
           "config/laptop.yaml"]
RULES = (r"\toprule", r"\midrule", r"\bottomrule")


@pytest.fixture(scope="module", params=SHIPPED)
def rendered(request) -> tuple[dict, dict[int, str]]:
    """A shipped config and each of its tables, rendered from synthetic records of every
    planned run (none missing: a ?? can only be a cell no run of the config is behind)."""
    config = grid.load_config(ROOT / request.param)
    runs, _ = synthetic.generate(config, seed=0)
    return config, {n: tables.render(tables.build(n, runs if t.reads_runs else None, config),
                                     synthetic=True)
                    for n, t in artifacts.TABLES.items()}


def tabular(tex: str) -> list[str]:
    """The lines between \\toprule and the end of the tabular."""
    lines = tex.splitlines()
    if r"\toprule" not in lines:
        return []
    return lines[lines.index(r"\toprule"):lines.index(r"\bottomrule") + 1]


def test_every_table_shows_no_unplanned_row(rendered):
    config, texts = rendered
    for number, tex in texts.items():
        assert cells.NO_DATA not in tex, f"table {number}: a ?? cell of synthetic data"
        planned = r"\begin{tabular}" in tex
        assert planned != ("This config plans no run of this table" in tex), number


def test_every_rule_separates_two_groups_present(rendered):
    _, texts = rendered
    for number, tex in texts.items():
        lines = tabular(tex)
        rules = [i for i, line in enumerate(lines) if line in RULES]
        for before, after in zip(rules, rules[1:], strict=False):
            assert after - before > 1, f"table {number}: two rules with nothing between"
        rows = [line for line in lines if line.endswith(r"\\")]
        assert not lines or rows, f"table {number}: a tabular without rows"


def test_tables_2_and_3_rule_where_b_changes(rendered):
    _, texts = rendered
    for number in (2, 3):
        groups, current = [], []
        for line in tabular(texts[number])[3:]:  # after the header's \midrule
            if line in RULES:
                groups.append(current)
                current = []
            elif line.endswith(r"\\"):
                current.append(line.split(" & ")[0])
        groups = [g for g in groups if g]
        assert all(len(set(g)) == 1 for g in groups), groups  # one b a group
        assert len({g[0] for g in groups}) == len(groups)  # a b in one group only


def test_a_group_is_labelled_on_its_first_row_only(rendered):
    _, texts = rendered
    for number in (5, 6, 7):  # a network, a configuration, a recipe
        segment: list[str] = []
        for line in tabular(texts[number]):
            if line in RULES:
                assert len(segment) == len(set(segment)), (number, segment)
                segment = []
            elif line.endswith(r"\\") and line.split(" & ")[0]:
                segment.append(line.split(" & ")[0])


def test_every_declaration_resolves():
    for declared in [*artifacts.TABLES.values(), *artifacts.FIGURES.values()]:
        assert callable(declared.build())
        assert (ROOT / "workflow" / "report" / f"{declared.caption}.rst").is_file()
        assert set(declared.roles) <= set(roles.ROLES)
        if declared.template:
            assert (tables.TEMPLATES / declared.template).is_file()
    with pytest.raises(InputError, match=r"table 8 is not allowed; tables are 1, 2"):
        artifacts.table(8)


def test_a_family_plays_a_role_under_another_name():
    config = yaml.safe_load((ROOT / "config/lion.yaml").read_text())
    renamed = copy.deepcopy(config)
    renamed["families"]["sweep"] = {**renamed["families"].pop("main"), "role": "main"}
    before = tables.build(2, synthetic.generate(grid.validate_config(config))[0],
                          grid.validate_config(config))
    after_config = grid.validate_config(renamed)
    after = tables.build(2, synthetic.generate(after_config)[0], after_config)
    assert [c.key for c in after.cells] == [c.key for c in before.cells]
    assert [c.n_runs for c in after.cells] == [c.n_runs for c in before.cells]


def test_a_builder_reading_an_undeclared_role_is_a_bug():
    with pytest.raises(ValueError, match=r"table7 reads role 'main' it does not declare"):
        artifacts.table(7).families({}, roles.MAIN)


def test_two_families_in_one_role_are_refused():
    config = yaml.safe_load((ROOT / "config/lion.yaml").read_text())
    config["families"]["again"] = {**config["families"]["main"], "role": "main"}
    with pytest.raises(grid.ConfigError, match=re.escape(
            "families main, again all play role 'main'")):
        grid.validate_config(config)
