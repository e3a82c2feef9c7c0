"""Which family of a config plays which part of the paper's study: its roles.

Tables, figures and quotes read families by the part they play (the main sweep, the
learning-rate x L2 ablation, ...), never by a literal family name: a config names its
families as it likes and says which plays which role with a family's `role` key. A family
without one plays the role of its own name when that is a role (every shipped config:
`main` plays main), so configs written before roles existed read unchanged. Declared here,
in plan, because the config's check names the allowed roles (initmem.plan.schema puts
ROLES in the schema's enum) and analysis reads them through `families`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# role -> what the paper does with it (the schema's description of `role`)
ROLES = {
    "main": "the main sweep: ResNet-9 over sigma_w x optimizer x b (Tables 1-3, Figs. 1-3, "
            "6; the baseline rows of Tables 4-6)",
    "lr_l2": "the learning-rate x L2 ablation for SGD (Table 4, Figs. 4, 6)",
    "long_sgd": "long constant-rate SGD (Table 4, Fig. 4)",
    "depth": "the depth comparison (Table 5, Figs. 5, 7)",
    "norm_aug": "normalisation and augmentation (Table 6, Fig. 8)",
    "best_recipe": "the best training recipes at the extreme sigma_w (Table 7)",
}
MAIN, LR_L2, LONG_SGD, DEPTH, NORM_AUG, BEST_RECIPE = ROLES


def role_of(name: str, family: dict[str, Any]) -> str | None:
    """The role family `name` plays: its `role`, else its name where that is a role."""
    return family.get("role", name if name in ROLES else None)


def cast(config: dict[str, Any]) -> dict[str, str]:
    """role -> the family playing it, of the roles some family of the config plays."""
    return {role: name for name, family in config.get("families", {}).items()
            if (role := role_of(name, family)) is not None}


def families(config: dict[str, Any], *roles: str, declared: Iterable[str] = tuple(ROLES),
             reader: str = "this reader") -> list[str]:
    """The families playing `roles`, in their order (none for a role no family plays);
    a config without families (a figure drawn without one) casts every role by name.
    `declared`: the roles `reader` (a table, a figure) says it reads; asking another is a
    bug of the reader, a ValueError naming both."""
    unknown = [role for role in roles if role not in ROLES]
    if unknown:
        raise ValueError(f"role {unknown[0]!r} is not allowed; roles are {', '.join(ROLES)}")
    undeclared = [role for role in roles if role not in declared]
    if undeclared:
        raise ValueError(f"{reader} reads role {undeclared[0]!r} it does not declare (it "
                         f"declares {', '.join(declared) or 'none'})")
    if "families" not in config:
        return list(roles)
    playing = cast(config)
    return [playing[role] for role in roles if role in playing]


def family(config: dict[str, Any], role: str) -> str | None:
    """The one family playing `role`, or None when no family of the config does."""
    found = families(config, role)
    return found[0] if found else None


def problems(config: dict[str, Any]) -> list[str]:
    """One line per role two families claim (explicitly or by name)."""
    claimed: dict[str, list[str]] = {}
    for name, spec in config["families"].items():
        if (role := role_of(name, spec)) is not None:
            claimed.setdefault(role, []).append(name)
    return [f"families {', '.join(names)} all play role {role!r}; a role is one family's "
            f"(give all but one another `role`)"
            for role, names in claimed.items() if len(names) > 1]
