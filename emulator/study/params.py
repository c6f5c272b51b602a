"""A model study's parameters checked against its model's struct: msgspec's reason turned into the
field path under ``params``, what was expected and a "did you mean" (spec.py reads a study file's
own errors with the same patterns)."""

from __future__ import annotations

import difflib
import re
from typing import Any

import msgspec

# msgspec's messages: "<reason> - at `$.path`", an unknown field, an enum value not among the choices.
AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
UNKNOWN = re.compile(r"^Object contains unknown field `(.*)`$", re.S)


def params_problem(struct: type[msgspec.Struct], params: dict[str, Any],
                   prefix: str = "params") -> tuple[str, str] | None:
    """(where, why) a model's parameters are refused, or None: the field path under ``prefix`` and
    msgspec's reason, an unknown field with the struct's fields and a "did you mean"."""
    try:
        msgspec.convert(params, struct, strict=True)
    except msgspec.ValidationError as err:
        m = AT.match(str(err))
        assert m is not None
        msg, path = m.group("msg"), (m.group("path") or "").lstrip(".")
        where = ".".join(x for x in (prefix, path) if x).replace(".[", "[")
        unknown, at = UNKNOWN.match(msg), _type_at(struct, path)
        if unknown and isinstance(at, msgspec.inspect.StructType):
            return f"{where}.{unknown.group(1)}", _choices("unknown field", unknown.group(1),
                                                           [f.name for f in at.fields])
        enum = _ENUM.match(msg)
        if enum and isinstance(at, msgspec.inspect.LiteralType):
            got = enum.group(1)
            return where, _choices(f"`{got}` is not a choice", got, [str(v) for v in at.values])
        return where, msg[:1].lower() + msg[1:]
    return None


_ENUM = re.compile(r"^Invalid enum value '(.*)'$", re.S)


def _choices(what: str, got: str, known: list[str]) -> str:
    close = difflib.get_close_matches(got, known, n=1, cutoff=0.6)
    hint = f"did you mean `{close[0]}`? " if close else ""
    return f"{what}; {hint}(expected one of {', '.join(f'`{k}`' for k in known)})"


def _type_at(struct: type[msgspec.Struct], path: str) -> msgspec.inspect.Type:
    """The type at ``path`` (``demand.cpu_size``, ``groups[0]``, ``methods[1]``) inside ``struct``,
    past lists and constraints."""
    def bare(t: msgspec.inspect.Type) -> msgspec.inspect.Type:
        while isinstance(t, msgspec.inspect.Metadata):
            t = t.type
        return t

    info = bare(msgspec.inspect.type_info(struct))
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("[") and isinstance(info, msgspec.inspect.ListType | msgspec.inspect.TupleType):
            info = bare(info.item_type if isinstance(info, msgspec.inspect.ListType) else info.item_types[0])
        elif isinstance(info, msgspec.inspect.StructType):
            info = bare(next(f.type for f in info.fields if f.name == part))
    return info
