"""`emulator` command line: the commands (each registered by the module that holds it), grouped in
`--help`, and the exit codes of the errors every command may end with."""

from __future__ import annotations

import argparse
import errno
import socket
import sys
from typing import Any

from emulator.cli.compare import add_compare_command, add_report_command
from emulator.cli.experiments import add_abuse_command, add_e3_tcp_command, add_efficiency_command
from emulator.cli.explain import add_command as add_explain_command
from emulator.cli.figures import add_command as add_figures_command
from emulator.cli.fuzz import add_command as add_fuzz_command
from emulator.cli.processes import add_commands as add_tcp_commands
from emulator.cli.run import add_rerun_command, add_run_command, add_validate_command
from emulator.cli.schema import add_command as add_schema_command
from emulator.cli.study import add_command as add_study_command
from emulator.cli.traces import add_command as add_import_command
from emulator.experiments.recovery import add_command as add_recovery_command
from emulator.experiments.reliability import add_command as add_reliability_command
from emulator.harness.invariants import InvariantViolation
from emulator.results.console import EXIT_FAILED, EXIT_STOPPED
from emulator.scenario.loader import ScenarioError
from rm import JournalCorrupt, JournalWriteFailed


class _Version(argparse.Action):
    """``--version``: the package version and the source tree's commit (asked of git only then)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the emulator's version and commit, then exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from emulator.results.record import emulator_version, source_commit

        print(f"emulator (hbemu) {emulator_version()}, commit {source_commit()}")
        parser.exit()


# `--help` lists the subcommands by group (argparse only has one flat list); a command missing
# here still shows, under "other".
COMMAND_GROUPS = {
    "run": ("run", "rerun", "report", "compare", "validate", "explain"),
    "experiments": ("study", "e3-tcp", "efficiency", "recovery", "reliability", "abuse"),
    "processes": ("rm", "nodes"),
    "tools": ("figures", "fuzz", "import", "schema"),
}


def _group_commands(p: argparse.ArgumentParser, sub: Any) -> None:
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    listed = {c for cmds in COMMAND_GROUPS.values() for c in cmds}
    groups = {**COMMAND_GROUPS, "other": tuple(c for c in helps if c not in listed)}
    width = max(len(c) for c in helps) + 2
    lines = []
    for group, cmds in groups.items():
        present = [c for c in cmds if c in helps]
        if present:
            lines.append(f"{group}:")
            lines += [f"  {c:<{width}}{helps[c]}" for c in present]
            lines.append("")
    lines.append("`emulator COMMAND --help` describes a command.")
    p.epilog = "\n".join(lines)
    sub.help = argparse.SUPPRESS  # not the flat list too


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="emulator", description="Cluster scheduler emulator",
                                usage="emulator [-h] [--version] COMMAND ...",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", prog="emulator")
    add_run_command(sub)
    add_rerun_command(sub)
    add_report_command(sub)
    add_validate_command(sub)
    add_compare_command(sub)
    add_e3_tcp_command(sub)
    add_abuse_command(sub)
    add_tcp_commands(sub)
    add_efficiency_command(sub)
    add_recovery_command(sub)
    add_reliability_command(sub)
    add_figures_command(sub)
    add_fuzz_command(sub)
    add_import_command(sub)
    add_schema_command(sub)
    add_study_command(sub)
    add_explain_command(sub)
    _group_commands(p, sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ScenarioError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except InvariantViolation as err:
        print(f"invariant violated: {err}", file=sys.stderr)
        return 3
    except JournalCorrupt as err:  # a run resumed or restarted from a damaged journal
        print(f"error: {err}", file=sys.stderr)
        return 2
    except JournalWriteFailed as err:  # before the run started (its first snapshot)
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except socket.gaierror as err:  # a host name that stopped resolving after it was checked
        print(f"error: cannot listen: {err.strerror}; choose another address", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
            raise
        # A server could not listen (another RM on the port, or an address not of this machine).
        print(f"error: cannot listen: {err.strerror}; choose another address or port", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_STOPPED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

