"""``kafkactl delegation-tokens``: delegation tokens (KIP-48), as Kafka's ``kafka-delegation-tokens.sh``
makes and manages them, with its option names.

- ``create [--renewer-principal User:NAME ...] [--max-life-time-period MS]``:
  a token owned by the principal kafkactl authenticates as (which must be a
  SASL or client-certificate principal, not one authenticated by a token).
  Prints the token id, its HMAC (base64: the password a client authenticates
  with), owner, renewers and times; ``-o json`` adds ``jaas_config``, the
  client setting that authenticates with it. ``--max-life-time-period`` -1 (the
  default) takes the broker's ``delegation.token.max.lifetime.ms``.
- ``renew --hmac-file FILE | --hmac-stdin [--renew-time-period MS]``: the owner
  or a renewer gives the token a new expiry, ``now + period`` (-1, the default:
  the broker's ``delegation.token.expiry.time.ms``), never past its maximum.
- ``expire --hmac-file FILE | --hmac-stdin [--expiry-time-period MS]``: the
  owner or a renewer ends the token: at once with -1 (the default), else
  ``now + period``.
- ``describe [--owner-principal User:NAME ...]``: the tokens kafkactl's
  principal may see (its own, those it renews, those it has DESCRIBE on),
  among those the owners given own or renew.

The HMAC is the token's secret: like a password it is read from a file or
standard input, never from the command line (``--hmac`` is refused, where
Kafka's tool takes it), and the file may be the one ``create -o json`` wrote
it in (``jq -r .hmac``). Exit codes as for every command (:mod:`kafkactl.errors`):
refused (tokens disabled, a connection that may not ask, not the owner or a
renewer, expired) 1; no token with that HMAC, a renewer that is not a User 2.
"""

from __future__ import annotations

import base64
import binascii
import time
from pathlib import Path
from typing import List, Optional

import typer

from broker.client import DelegationToken
from kafkactl._common import admin_client, output_format, read_secret, refuse_secret_argument
from kafkactl.errors import CliError
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="Create, renew, expire and describe delegation tokens.", no_args_is_help=True)

COLUMNS = ["token_id", "hmac", "owner", "renewers", "issued", "expires", "max"]


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _row(token: DelegationToken, table: bool) -> dict:
    row = {"token_id": token.token_id, "hmac": token.hmac_base64, "owner": token.owner,
           "renewers": ",".join(token.renewers) if table else list(token.renewers)}
    if table:
        row.update(issued=_when(token.issue_timestamp_ms), expires=_when(token.expiry_timestamp_ms),
                   max=_when(token.max_timestamp_ms))
    else:
        row.update(issue_timestamp_ms=token.issue_timestamp_ms, expiry_timestamp_ms=token.expiry_timestamp_ms,
                   max_timestamp_ms=token.max_timestamp_ms)
    return row


def _hmac(hmac: Optional[str], hmac_file: Optional[Path], hmac_stdin: bool) -> bytes:
    refuse_secret_argument(hmac, "hmac")
    text = read_secret(hmac_file, hmac_stdin, "hmac").strip()
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CliError("the hmac is not base64 (it is printed by create and describe as such)") from None


HMAC_FILE = typer.Option(None, "--hmac-file", metavar="FILE", exists=True, dir_okay=False, readable=True,
                         help="Read the token's HMAC (base64) from FILE.")
HMAC_STDIN = typer.Option(False, "--hmac-stdin", help="Read the token's HMAC (base64) from standard input.")
HMAC_ARG = typer.Option(None, "--hmac", hidden=True, help="Refused: see --hmac-stdin.")


@app.command("create")
def create(
    ctx: typer.Context,
    renewers: Optional[List[str]] = typer.Option(None, "--renewer-principal", metavar="User:NAME",
                                                 help="A principal that may renew and expire the token (repeat)."),
    max_life_ms: int = typer.Option(-1, "--max-life-time-period", metavar="MS",
                                    help="Its maximum lifetime in ms; -1: the broker's maximum."),
) -> None:
    """Create a token owned by the principal kafkactl authenticates as."""
    with admin_client(ctx) as admin:
        token = admin.create_delegation_token(renewers or [], max_life_ms)
    table = output_format(ctx) is OutputFormat.table
    row = _row(token, table)
    if not table:
        row["jaas_config"] = token.jaas_config()
    emit([row] if table else row, output_format(ctx), COLUMNS)


@app.command("renew")
def renew(
    ctx: typer.Context,
    hmac_file: Optional[Path] = HMAC_FILE,
    hmac_stdin: bool = HMAC_STDIN,
    period_ms: int = typer.Option(-1, "--renew-time-period", metavar="MS",
                                  help="The new expiry, this long from now (ms); -1: the broker's expiry time."),
    hmac: Optional[str] = HMAC_ARG,
) -> None:
    """Renew a token (its owner or a renewer)."""
    secret = _hmac(hmac, hmac_file, hmac_stdin)
    with admin_client(ctx) as admin:
        expiry = admin.renew_delegation_token(secret, period_ms)
    _emit_expiry(ctx, "renewed", expiry)


@app.command("expire")
def expire(
    ctx: typer.Context,
    hmac_file: Optional[Path] = HMAC_FILE,
    hmac_stdin: bool = HMAC_STDIN,
    period_ms: int = typer.Option(-1, "--expiry-time-period", metavar="MS",
                                  help="Expire this long from now (ms); -1: at once."),
    hmac: Optional[str] = HMAC_ARG,
) -> None:
    """Expire a token (its owner or a renewer): at once, or later."""
    secret = _hmac(hmac, hmac_file, hmac_stdin)
    with admin_client(ctx) as admin:
        expiry = admin.expire_delegation_token(secret, period_ms)
    _emit_expiry(ctx, "expired" if period_ms < 0 else "expires", expiry)


def _emit_expiry(ctx: typer.Context, what: str, expiry_ms: int) -> None:
    if output_format(ctx) is OutputFormat.table:
        print(f"token {what}: expiry {_when(expiry_ms)}")
    else:
        emit({"expiry_timestamp_ms": expiry_ms}, output_format(ctx))


@app.command("describe")
def describe(
    ctx: typer.Context,
    owners: Optional[List[str]] = typer.Option(None, "--owner-principal", metavar="User:NAME",
                                               help="Only tokens this principal owns or renews (repeat)."),
) -> None:
    """The tokens kafkactl's principal may see."""
    with admin_client(ctx) as admin:
        tokens = admin.describe_delegation_tokens(owners or None)
    table = output_format(ctx) is OutputFormat.table
    if table and not tokens:
        print("no delegation tokens")
        return
    emit([_row(t, table) for t in tokens], output_format(ctx), COLUMNS)
