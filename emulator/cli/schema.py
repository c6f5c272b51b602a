"""`emulator schema`: the scenario file's JSON Schema (for editors), or its Markdown reference."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from emulator.scenario.reference import json_schema, markdown


def add_command(sub: Any) -> None:
    s = sub.add_parser("schema", help="print the scenario file's JSON Schema (for editors) or its reference")
    s.add_argument("--markdown", action="store_true",
                   help="the field reference instead (docs/scenario-reference.md)")
    s.set_defaults(func=cmd_schema)


def cmd_schema(args: argparse.Namespace) -> int:
    if args.markdown:
        sys.stdout.write(markdown())
    else:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(json_schema())).decode() + "\n")
    return 0
