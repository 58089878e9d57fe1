"""``kafkactl users``: SCRAM credentials of users (KIP-554), as Kafka's
``kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'``.

- ``list [USER ...]``: user, mechanism and iterations of every SCRAM credential
  (of the users named, if any; one without a credential is RESOURCE_NOT_FOUND,
  exit 2). DescribeUserScramCredentials.
- ``set-scram USER --mechanism SCRAM-SHA-256|SCRAM-SHA-512 [--iterations N]
  --password-file FILE | --password-stdin``: creates or replaces the user's
  credential for that mechanism. The password is read from the file or from
  standard input: all of it, less one trailing newline (``\\n`` or ``\\r\\n``); it
  must be one non-empty line. kafkactl sends a random salt and the salted
  password (RFC 5802), never the password. ``--iterations``: 4096 (the default,
  Kafka's minimum) to 16384. AlterUserScramCredentials.
- ``delete-scram USER --mechanism M``: removes that credential; one that does
  not exist is RESOURCE_NOT_FOUND (exit 2).

The requests go to any broker. A refused request (not authorized) is exit 1, a
value the broker will not take (UNACCEPTABLE_CREDENTIAL) exit 2; other exit
codes as for every command (:mod:`kafkactl.errors`).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from broker.client import UserScramCredentialDeletion, UserScramCredentialUpsertion
from kafkactl._common import admin_client, output_format, read_secret, refuse_secret_argument
from kafkactl.errors import CliError
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="List, set and delete the SCRAM credentials of users.", no_args_is_help=True)

MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _mechanism(value: str) -> str:
    if value.strip().upper() not in MECHANISMS:
        raise typer.BadParameter(f"must be SCRAM-SHA-256 or SCRAM-SHA-512, not {value!r}")
    return value.strip().upper()


MECHANISM_OPTION = typer.Option(..., "--mechanism", "-m", metavar="MECHANISM", callback=_mechanism,
                                help="SCRAM-SHA-256 or SCRAM-SHA-512 (either case).")


@app.command("list")
def list_users(ctx: typer.Context,
               users: Optional[List[str]] = typer.Argument(None, help="Only these users (default: every user).")
               ) -> None:
    """Every SCRAM credential: user, mechanism, iterations."""
    with admin_client(ctx) as admin:
        described = admin.describe_user_scram_credentials(users or None)
    rows = [{"user": user, "mechanism": c.mechanism, "iterations": c.iterations}
            for user, infos in described.items() for c in infos]
    fmt = output_format(ctx)
    if fmt is OutputFormat.table and not rows:
        print("no SCRAM credentials")
        return
    emit(rows, fmt, ["user", "mechanism", "iterations"])


@app.command("set-scram")
def set_scram(
    ctx: typer.Context,
    user: str = typer.Argument(..., help="User name."),
    mechanism: str = MECHANISM_OPTION,
    iterations: int = typer.Option(MIN_ITERATIONS, "--iterations", min=MIN_ITERATIONS, max=MAX_ITERATIONS,
                                   help="PBKDF2 iterations (4096 to 16384)."),
    password_file: Optional[Path] = typer.Option(None, "--password-file", metavar="FILE", exists=True,
                                                 dir_okay=False, readable=True,
                                                 help="Read the password from FILE (one line)."),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from standard input."),
    password: Optional[str] = typer.Option(None, "--password", hidden=True, help="Refused: see --password-stdin."),
) -> None:
    """Create or replace USER's SCRAM credential for one mechanism."""
    refuse_secret_argument(password, "password")
    if not user:
        raise CliError("the user name is empty")
    secret = read_secret(password_file, password_stdin, "password")
    with admin_client(ctx) as admin:
        admin.alter_user_scram_credentials(
            upsertions=[UserScramCredentialUpsertion(user, mechanism, secret, iterations)])
    result = {"user": user, "mechanism": mechanism, "iterations": iterations}
    if output_format(ctx) is OutputFormat.table:
        print(f"set the {mechanism} credential of {user} ({iterations} iterations)")
    else:
        emit(result, output_format(ctx))


@app.command("delete-scram")
def delete_scram(
    ctx: typer.Context,
    user: str = typer.Argument(..., help="User name."),
    mechanism: str = MECHANISM_OPTION,
) -> None:
    """Delete USER's SCRAM credential for one mechanism."""
    with admin_client(ctx) as admin:
        admin.alter_user_scram_credentials(deletions=[UserScramCredentialDeletion(user, mechanism)])
    if output_format(ctx) is OutputFormat.table:
        print(f"deleted the {mechanism} credential of {user}")
    else:
        emit({"user": user, "mechanism": mechanism, "deleted": True}, output_format(ctx))
