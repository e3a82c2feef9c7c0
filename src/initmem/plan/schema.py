"""The config's JSON schema, with errors that name the key, the bad value and what is allowed.

The workflow's parse, every command that reads a config and the tests check it here, once
(grid.validate_config), and read the config it returns with the schema's defaults filled
in; this module turns jsonschema's errors into one line each, so that all of them share
both the rules and the wording.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from initmem.errors import InputError
from initmem.plan import roles
from initmem.plan.architectures import ARCHS

SCHEMA_PATH = Path(__file__).parent / "schemas" / "config.schema.yaml"


class ConfigError(InputError):
    """The config breaks the schema or a rule the schema cannot express."""


@cache
def schema() -> dict[str, Any]:
    """The schema file, with the declared networks as `arch`'s enum and the roles as a
    family's `role` enum: a network is one entry of initmem.plan.architectures and a role
    one of initmem.plan.roles, not also a list here."""
    loaded = yaml.safe_load(SCHEMA_PATH.read_text())
    loaded["$defs"]["field"]["arch"]["enum"] = list(ARCHS)
    loaded["$defs"]["family"]["properties"]["role"]["enum"] = list(roles.ROLES)
    return loaded


def check_schema(config: Any) -> None:
    """Raise ConfigError listing every schema violation, one line each, then every role
    two families claim (the one rule across families a schema cannot say; checked here,
    where every reader of a config passes first)."""
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.path)))
    if errors:
        raise invalid(dict.fromkeys(describe(e) for e in errors))  # a $ref can report one twice
    if problems := roles.problems(config):
        raise invalid(problems)


def invalid(problems: Iterable[str]) -> ConfigError:
    """The error of a config with these problems: the first on the first line (what a
    reader, or Snakemake's output, shows first), each other on a line of its own."""
    return ConfigError("invalid config: " + "\n  ".join(problems))


def describe(error: jsonschema.ValidationError) -> str:
    """One readable line: `key=value is not allowed; key must be ...`."""
    key = _key(error.absolute_path)
    kind, allowed, value = error.validator, error.validator_value, error.instance
    if kind == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        extra = sorted(set(value) - set(known))
        where = f"{key}: " if key else ""
        return (f"{where}unknown key(s) {', '.join(map(repr, extra))}; allowed keys: "
                f"{', '.join(known) if known else 'none'}")
    if "propertyNames" in error.schema_path:
        return f"{key}: name {value!r} is not allowed; names must match {allowed}"
    if kind == "required":
        missing = [k for k in allowed if k not in value]
        return f"{key or 'config'}: missing required key(s) {', '.join(map(repr, missing))}"
    if kind == "oneOf":  # sigma_sets: say what each alternative wants
        return f"{key}={value!r} is not allowed; {key} must be a list of positive numbers " \
               "or {start, stop, step}"
    return f"{key}={value!r} is not allowed; {key} must be {_rule(kind, allowed)}{_hint(value)}"


def _hint(value: Any) -> str:
    """Snakemake reads configs as YAML 1.1, where `1e-5` is text: say how to write it."""
    if not isinstance(value, str):
        return ""
    try:
        float(value)
    except ValueError:
        return ""
    return (" (a number in quotes, or one Snakemake's YAML reads as text: write it with a "
            "dot and a signed exponent, such as 1.0e-5)")


def _rule(kind: str, allowed: Any) -> str:
    rules = {
        "enum": lambda a: f"one of {', '.join(map(str, a))}",
        "type": lambda a: f"of type {' or '.join(a) if isinstance(a, list) else a}",
        "minimum": lambda a: f">= {a}",
        "maximum": lambda a: f"<= {a}",
        "exclusiveMinimum": lambda a: f"> {a}",
        "exclusiveMaximum": lambda a: f"< {a}",
        "minItems": lambda a: f"a list of at least {a} item(s)",
        "pattern": _pattern_rule,
        "uniqueItems": lambda a: "a list without repeated values",
        "minProperties": lambda a: f"a mapping with at least {a} entry(ies)",
    }
    return rules[kind](allowed) if kind in rules else f"valid ({kind}: {allowed!r})"


def _pattern_rule(pattern: str) -> str:
    """A path's pattern in words (its $defs entry's description), any other as the regex."""
    path = schema()["$defs"]["path"]
    return path["description"] if pattern == path["pattern"] else f"a string matching {pattern}"


def _key(path: Iterable[Any]) -> str:
    key = ""
    for part in path:
        key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else str(part)
    return key


def schema_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """Fill in the `default`s of the schema's top-level sections (in place; returned)."""
    for name, prop in schema()["properties"].items():
        if "default" in prop and name not in config:
            config[name] = prop["default"]
        section = config.get(name)
        if isinstance(section, dict):
            for key, sub in prop.get("properties", {}).items():
                if "default" in sub:
                    section.setdefault(key, sub["default"])
    return config
