"""The one layer that reads what a user writes (configs and pack specs) and checks it.

`load_yaml` reads a YAML or JSON file strictly: floats as YAML 1.2 and JSON write them
(PyYAML's YAML 1.1 rules read `1e-05`, which `json.dumps` writes, as a string), and a
key written twice in one mapping is refused (PyYAML keeps the last one silently), and so
are anchors and aliases (configs have no use for them, and a 1 KB file of aliases expands
to gigabytes: "billion laughs") and nesting deeper than MAX_DEPTH (`parse_json` bounds
JSON the same way, and its length by the caller's bound); a tag SafeLoader
cannot construct (`!!python/...`) is refused by name. Every failure to
read is one line naming the file. `check_spec` holds a pack spec to the
config schema's own field rules (strict JSON types: no bool for an integer, no string
for a number), so `initmem grid` and `initmem train` accept exactly the same values.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

import jsonschema
import yaml

from initmem.errors import InputError
from initmem.plan.schema import describe, schema

FLOAT_TAG = "tag:yaml.org,2002:float"
# Levels of nesting a config, spec, manifest or checkpoint state may have (they use under
# ten); far below where a recursive parser or walker exhausts the stack.
MAX_DEPTH = 64
# YAML 1.2's core schema float: the exponent's sign and the mantissa's dot are optional.
YAML12_FLOAT = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?
                              |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                              |[-+]?\.(?:inf|Inf|INF)
                              |\.(?:nan|NaN|NAN))$""", re.X)


class Refused(yaml.MarkedYAMLError):
    """Valid YAML that a config may not use."""


class StrictLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 floats that refuses a key repeated in one mapping, anchors,
    aliases and nesting deeper than MAX_DEPTH."""

    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        """The next node, refusing an anchor or alias and nesting deeper than MAX_DEPTH."""
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise Refused(None, None, "an anchor or alias (&name, *name); configs have no use "
                          "for them (aliases can expand a small file into gigabytes): write "
                          "each value out", event.start_mark)
        if self.depth >= MAX_DEPTH:
            raise Refused(None, None, f"nested deeper than {MAX_DEPTH} levels",
                          event.start_mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        """The mapping, refusing a key written twice in it (merge keys aside)."""
        seen: set = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}; each key may appear once in a mapping",
                    key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_undefined(self, node: yaml.Node) -> NoReturn:
        """A tag SafeLoader has no constructor for (!!python/object/apply:os.system, say):
        refused by name, never constructed."""
        raise Refused(None, None, f"the tag {node.tag!r}; a config holds plain values, "
                      "lists and mappings, never a typed object", node.start_mark)


# A copy of SafeLoader's resolvers with the float rule replaced (never SafeLoader's own).
StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != FLOAT_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
StrictLoader.add_implicit_resolver(FLOAT_TAG, YAML12_FLOAT, list("-+0123456789."))
StrictLoader.add_constructor(None, StrictLoader.construct_undefined)


def parse_yaml(text: str, where: object = "<text>") -> Any:
    """YAML or JSON text as Python data; InputError names `where` and the line."""
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = err.problem or err.context or "unreadable"
        what = "refused" if isinstance(err, Refused) else "not valid YAML or JSON"
        raise InputError(f"{where}: {what}{at}: {problem}") from None
    except yaml.YAMLError as err:
        raise InputError(f"{where}: not valid YAML or JSON: {err}") from None


def parse_json(data: str | bytes, where: object, max_bytes: int) -> Any:
    """JSON text as Python data, in time linear in its length (the standard library's
    parser, no pattern over the text); InputError names `where` when it is longer than
    `max_bytes` (checked first), not JSON, or nested deeper than MAX_DEPTH."""
    if len(data) > max_bytes:
        raise InputError(f"{where}: {len(data)} bytes of JSON, more than the {max_bytes} "
                         "such a file may take")
    try:
        value = json.loads(data)
    except RecursionError:  # the parser's own bound on nesting, far below the stack's
        raise InputError(_too_deep(where)) from None
    except ValueError as err:  # JSONDecodeError, bad UTF-8, an integer of 4,300+ digits
        raise InputError(f"{where}: not valid JSON ({' '.join(str(err).split())})") from None
    if _depth(value) > MAX_DEPTH:
        raise InputError(_too_deep(where))
    return value


def _too_deep(where: object) -> str:
    return f"{where}: JSON nested deeper than {MAX_DEPTH} levels; initmem's files nest under ten"


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in `value` (iteratively: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend((v, depth) for v in (value.values() if isinstance(value, dict)
                                                  else value))
    return deepest


def load_yaml(path: str | Path, what: str) -> dict[str, Any]:
    """The mapping in a YAML or JSON file (`what`: 'config', 'pack spec', for messages)."""
    path = Path(path)
    if not path.is_file():
        state = "is a folder" if path.is_dir() else "does not exist"
        raise InputError(f"{what} {path} {state}; give the path of a YAML or JSON file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{what} {path} is not a text file (byte {err.start} is not "
                         f"UTF-8); a {what} is YAML or JSON text") from None
    if "\0" in text:
        raise InputError(f"{what} {path} is not a text file (it holds NUL bytes); a "
                         f"{what} is YAML or JSON text")
    data = parse_yaml(text, path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{what} {path} holds a {type(data).__name__}; a {what} must be a "
                         "mapping of keys to values")
    return data


SPEC_REQUIRED = ("family", "arch", "optimizer", "b", "epochs")


@cache
def spec_schema() -> dict[str, Any]:
    """A pack spec's JSON schema, built from the config schema's recipe and fields: a
    recipe (its family named, the fields a config may leave to defaults required) and
    a non-empty list of {sigma_w, seed}."""
    config = schema()
    recipe = copy.deepcopy(config["$defs"]["recipe"])
    recipe["properties"]["family"] = {"$ref": "#/$defs/field/family"}
    recipe["required"] = list(SPEC_REQUIRED)
    run = {"type": "object", "additionalProperties": False, "required": ["sigma_w", "seed"],
           "properties": {"sigma_w": {"$ref": "#/$defs/field/sigma_w"},
                          "seed": {"$ref": "#/$defs/field/seed"}}}
    return {"$defs": config["$defs"], "type": "object", "additionalProperties": False,
            "required": ["recipe", "runs"],
            "properties": {"recipe": recipe,
                           "runs": {"type": "array", "minItems": 1, "items": run}}}


def check_spec(data: Any, where: object = "spec") -> None:
    """Raise InputError with the first of a pack spec's schema violations, one line."""
    validator = jsonschema.Draft202012Validator(spec_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.path)))
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise InputError(f"{where}: {describe(errors[0])}{more}")
