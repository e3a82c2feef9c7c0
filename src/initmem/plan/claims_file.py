"""The claims file (paper/claims.yaml): what a study sets out to judge, read and checked.

Each claim names its cells (selections of runs, plan.cells.select_cell), the values it
computes on them and the conditions (`holds`) that make it true; the file's format is in
its header and its schema in plan/schemas/claims.schema.yaml. Planning reads it to stage
a study in looks (plan.looks); the verdict engine (initmem.analysis.claims) judges it.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from initmem.errors import InputError
from initmem.plan.inputs import load_yaml

SCHEMA_PATH = Path(__file__).parent / "schemas" / "claims.schema.yaml"


CONDITION = re.compile(r"^(?P<lhs>.+?)\s*(?P<op>>=|<=|>>|~)\s*(?P<rhs>.+?)"
                       r"(?:\s+within\s+(?P<margin>\d+(?:\.\d*)?(?:e-?\d+)?))?$")


TERM = re.compile(r"([+-]?)\s*([A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d*)?(?:e-?\d+)?)")


class ClaimsError(InputError):
    """The claims file is malformed; the message names the claim and the key."""


@cache
def schema() -> dict[str, Any]:
    """The claims file's schema (claims.schema.yaml), read once."""
    return yaml.safe_load(SCHEMA_PATH.read_text())


def read_claims(path: str | Path) -> list[dict[str, Any]]:
    """The claims of a file, checked against the schema and for consistent names."""
    try:
        data = load_yaml(path, "claims file")
    except InputError as err:
        raise ClaimsError(str(err)) from None
    errors = sorted(jsonschema.Draft202012Validator(schema()).iter_errors(data),
                    key=lambda e: list(map(str, e.path)))
    if errors:
        lines = [f"{'.'.join(map(str, e.absolute_path)) or 'claims'}: {e.message}"
                 for e in errors]
        raise ClaimsError(f"{path}: invalid claims file:\n  " + "\n  ".join(lines))
    for claim in data["claims"]:
        _check_names(claim)
    ids = [c["id"] for c in data["claims"]]
    if len(set(ids)) != len(ids):
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        raise ClaimsError(f"{path}: claim ids repeat: {repeated}")
    return data["claims"]


def _check_names(claim: dict[str, Any]) -> None:
    cells = claim["cells"]
    used = [spec["cell"] for spec in claim["values"].values()]
    used += list(claim.get("gates", {}).get("trained", {}))
    used += [c["cell"] for c in claim.get("gates", {}).get("clock", [])]
    for cell in used:
        if cell not in cells:
            raise ClaimsError(f"claim {claim['id']}: cell {cell!r} is used but not defined; "
                              f"its cells are {', '.join(cells)}")
    for text in claim["holds"]:
        match = CONDITION.match(text)
        if match is None:
            raise ClaimsError(f"claim {claim['id']}: condition {text!r} is not 'a OP b' with "
                              "OP one of >=, <=, >>, ~ (with 'within m' after ~)")
        if (match["op"] == "~") != (match["margin"] is not None):
            raise ClaimsError(f"claim {claim['id']}: condition {text!r}: '~' needs its "
                              "equivalence margin ('a ~ b within 1'), and only '~' takes one")
        for _, term in TERM.findall(match["lhs"] + " " + match["rhs"]):
            if not is_number(term) and term not in claim["values"]:
                raise ClaimsError(f"claim {claim['id']}: condition {text!r} names {term!r}; "
                                  f"its values are {', '.join(claim['values'])}")


def is_number(term: str) -> bool:
    """Whether a term of a condition is a number (else it names a value)."""
    return term[0].isdigit()
