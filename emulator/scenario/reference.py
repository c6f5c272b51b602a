"""The scenario file reference (docs/scenario-reference.md), generated from the msgspec structs.

Every field of every table a scenario file may hold, with its type and bounds, its default and the
comment above it in the source (the structs are the one definition: the loader checks files against
them, this module describes them, ``emulator schema`` gives editors their JSON Schema).
"""

from __future__ import annotations

import inspect
import io
import re
import tokenize
from typing import Any

import msgspec
import msgspec.inspect as mi

from emulator.scenario.schema import Scenario

REGENERATE = "emulator schema --markdown > docs/scenario-reference.md"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (TOML decodes to the same structure), for editors."""
    schema: dict[str, Any] = msgspec.json.schema(Scenario)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "hbemu scenario", **schema}


def _comments(cls: type) -> dict[str, str]:
    """Each field's comment in ``cls``'s source: the ``#`` lines right above it and one after it."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    pending: list[str] = []
    field = re.compile(r"^\s{4}([a-z_][a-z0-9_]*)\s*:")
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        row = tok.start[0] - 1
        text = tok.string.lstrip("#").strip()
        m = field.match(lines[row])
        if m and tok.start[1] > 0 and lines[row][: tok.start[1]].strip():  # a comment after a field
            out[m.group(1)] = " ".join([*out.get(m.group(1), "").split(" "), text]).strip()
            continue
        pending.append(text)
        nxt = lines[row + 1] if row + 1 < len(lines) else ""
        m = field.match(nxt)
        if m:
            out[m.group(1)] = " ".join(pending)
            pending = []
        elif not nxt.strip().startswith("#"):
            pending = []
    return out


def _number(v: float) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e12:
        v = int(v)
    return f"{v:g}" if isinstance(v, float) else f"{v:,}".replace(",", "_") if abs(v) >= 10_000 else str(v)


def _bounds(t: Any) -> str:
    parts = []
    for attr, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
        v = getattr(t, attr, None)
        if v is not None:
            parts.append(f"{sign} {_number(v)}")
    return f" ({', '.join(parts)})" if parts else ""


def _type(t: Any) -> str:
    if isinstance(t, mi.IntType):
        return "integer" + _bounds(t)
    if isinstance(t, mi.FloatType):
        return "number" + _bounds(t)
    if isinstance(t, mi.StrType):
        return "string" + (f" (pattern `{t.pattern}`)" if t.pattern else "")
    if isinstance(t, mi.BoolType):
        return "boolean"
    if isinstance(t, mi.LiteralType):
        return " | ".join(f'`"{v}"`' if isinstance(v, str) else f"`{v}`" for v in t.values)
    if isinstance(t, mi.StructType):
        tag = t.cls.__struct_config__.tag
        return f"table `{t.cls.__name__}`" + (f' (kind = "{tag}")' if tag is not None else "")
    if isinstance(t, mi.ListType | mi.TupleType | mi.VarTupleType):
        if isinstance(t, mi.TupleType):
            return "[" + ", ".join(_type(x) for x in t.item_types) + "]"
        return f"list of {_type(t.item_type)}"
    if isinstance(t, mi.DictType):
        return f"table of {_type(t.value_type)}"
    if isinstance(t, mi.UnionType):
        return " or ".join(_type(x) for x in t.types if not isinstance(x, mi.NoneType))
    return "any"


def _default(f: mi.Field) -> str:
    if f.required:
        return "required"
    value = f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
    if value is None:
        return "unset"
    if isinstance(value, msgspec.Struct):
        return "(defaults)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, int | float):
        return f"`{_number(value)}`"
    return f"`{msgspec.json.encode(value).decode()}`"


def _structs(t: Any) -> list[mi.StructType]:
    if isinstance(t, mi.StructType):
        return [t]
    if isinstance(t, mi.UnionType):
        return [s for x in t.types for s in _structs(x)]
    if isinstance(t, mi.ListType | mi.VarTupleType):
        return _structs(t.item_type)
    if isinstance(t, mi.DictType):
        return _structs(t.value_type)
    return []


def _walk(t: mi.StructType, path: str, seen: dict[type, list[str]], order: list[mi.StructType]) -> None:
    if t.cls in seen:
        seen[t.cls].append(path)
        return
    seen[t.cls] = [path]
    order.append(t)
    for f in t.fields:
        kinds = f.type.types if isinstance(f.type, mi.UnionType) else (f.type,)
        item = "[]" if any(isinstance(x, mi.ListType) for x in kinds) else ""
        for s in _structs(f.type):
            _walk(s, f"{path}.{f.encode_name}{item}".lstrip("."), seen, order)


# The source's pointers to the design notes and the seed documents, which users do not have.
_INTERNAL = re.compile(r"\s*\((?:[^()]*?)(?:design\.md|seed \d+)[^()]*\)|\s*design\.md(?: §\w+)?")


def _public(text: str) -> str:
    return _INTERNAL.sub("", text)


def _cell(text: str) -> str:
    return _public(text).replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """docs/scenario-reference.md."""
    root = mi.type_info(Scenario)
    assert isinstance(root, mi.StructType)
    seen: dict[type, list[str]] = {}
    order: list[mi.StructType] = []
    _walk(root, "", seen, order)
    out = [
        "# Scenario file reference",
        "",
        "Every table and field a scenario file may hold, generated from the structs the loader checks",
        f"files against (`{REGENERATE}`; a test fails when this file and the structs disagree).",
        "A field a table does not list is an error, with the closest name suggested. For an editor,",
        "`emulator schema > scenario.schema.json` prints the same as a JSON Schema. How the fields fit",
        "together, with examples: [usage.md](usage.md).",
        "",
    ]
    for t in order:
        paths = seen[t.cls]
        title = "top level" if paths == [""] else ", ".join(f"`{p}`" for p in paths)
        tag = t.cls.__struct_config__.tag
        out += [f"## {title}" + (f' — kind = "{tag}"' if tag is not None else "") + f" (`{t.cls.__name__}`)",
                ""]
        doc = t.cls.__dict__.get("__doc__")
        if doc:
            out += [_public(" ".join(doc.split())), ""]
        comments: dict[str, str] = {}
        for base in reversed(t.cls.__mro__):  # a field's comment where it is declared (a base class)
            if isinstance(base, type) and issubclass(base, msgspec.Struct) and base is not msgspec.Struct:
                comments.update(_comments(base))
        out += ["| field | type | default | meaning |", "|---|---|---|---|"]
        for f in t.fields:
            out.append(f"| `{f.encode_name}` | {_cell(_type(f.type))} | {_default(f)} | "
                       f"{_cell(comments.get(f.name, ''))} |")
        out.append("")
    return "\n".join(out)
