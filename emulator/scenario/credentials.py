"""The RM's shared secret, from the scenario itself, an environment variable or a file.

Resolved once, when the scenario is loaded: the result carries the secret in ``rm.credentials``
only (the two indirections cleared), so every consumer — the RM's registration check, the node
workers — reads one field. The secret itself never goes into an error message, a log line or a
result file; errors name the variable or the file instead.

Secure by default: a run that starts its own workers, or an RM listening on a loopback address,
without a secret uses a random one made for the run (``with_run_secret``); an RM listening on
any other address without one refuses to start (``require_secret``).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

import msgspec

from emulator.scenario.schema import Scenario


class CredentialsError(ValueError):
    """Where the secret should come from, and why it could not be read (never the secret)."""


def read_secret(env: str = "", file: str = "", base_dir: Path | None = None,
                environ: Mapping[str, str] | None = None, names: tuple[str, str] = (
                    "rm.credentials_env", "rm.credentials_file")) -> str:
    """The secret named by ``env`` (a variable) or ``file`` (relative to ``base_dir``); ``names``
    are the settings' names for the error messages."""
    if env:
        value = (os.environ if environ is None else environ).get(env)
        if value is None:
            raise CredentialsError(f"at `{names[0]}`: environment variable `{env}` is not set")
        secret = value.strip()
        if not secret:
            raise CredentialsError(f"at `{names[0]}`: environment variable `{env}` is empty")
        return secret
    if file:
        path = Path(file)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        try:
            secret = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise CredentialsError(f"at `{names[1]}`: {path}: no such file") from None
        except (OSError, UnicodeDecodeError) as err:
            raise CredentialsError(f"at `{names[1]}`: cannot read {path}: "
                                   f"{type(err).__name__}") from None
        if not secret:
            raise CredentialsError(f"at `{names[1]}`: {path} is empty")
        return secret
    return ""


def resolve_credentials(scenario: Scenario, base_dir: Path | None = None,
                        environ: Mapping[str, str] | None = None) -> Scenario:
    rm = scenario.rm
    if not (rm.credentials_env or rm.credentials_file):
        return scenario
    secret = read_secret(rm.credentials_env, rm.credentials_file, base_dir, environ)
    rm = msgspec.structs.replace(rm, credentials=secret, credentials_env="", credentials_file="")
    return msgspec.structs.replace(scenario, rm=rm)


class MissingSecretError(CredentialsError):
    """Nodes would be served on a reachable address with no secret."""


def generate_secret() -> str:
    return secrets.token_urlsafe(32)


def with_run_secret(scenario: Scenario, secret: str | None = None) -> Scenario:
    """``scenario`` with ``secret`` (default: a fresh random one) if it has none of its own."""
    if scenario.rm.credentials:
        return scenario
    rm = msgspec.structs.replace(scenario.rm, credentials=secret or generate_secret())
    return msgspec.structs.replace(scenario, rm=rm)


def is_loopback(host: str) -> bool:
    """Only this machine can reach ``host`` (a name other than localhost counts as reachable)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_secret(scenario: Scenario, host: str) -> None:
    """Refuse to serve nodes on a non-loopback ``host`` without a shared secret."""
    if not scenario.rm.credentials and not is_loopback(host):
        raise MissingSecretError(
            f"refusing to listen on {host or 'every address'} without a shared secret: anyone who can "
            "reach it could register nodes; set `rm.credentials_file` or `rm.credentials_env` in the "
            "scenario (or listen on 127.0.0.1)"
        )
