"""``kafkactl quotas``: client quotas (KIP-546's DescribeClientQuotas and AlterClientQuotas, to any broker),
as Kafka's ``kafka-configs.sh --bootstrap-server ... --entity-type users|clients|ips`` shows and changes them.

A quota belongs to an entity: a user (``--user NAME``, the principal's name: ``alice`` for ``User:alice``),
a client id (``--client-id ID``), or both (that client id of that user); or a client IP address alone
(``--ip ADDRESS``, Kafka 2.8). ``--user-default``, ``--client-id-default`` and ``--ip-default`` name the
default entity of the type instead: its quota applies to every user (client id, address) without one of
its own. The keys, each enforced by every broker on its own traffic:

    producer_byte_rate        bytes/s produced (a whole number)
    consumer_byte_rate        bytes/s fetched by consumers (a whole number)
    request_percentage        percent of the broker's time spent on the client's requests
    controller_mutation_rate  topic partitions created or deleted per second
    connection_creation_rate  new connections per second from an IP address (a whole number; IP entities only)

- ``list [ENTITY FILTER] [--strict]``: every entity with quotas, or those the filter matches: ``--user
  NAME``, ``--user-default``, ``--user-any`` (any user, the default included) and the same for
  ``--client-id`` and ``--ip`` (not with the others); a type not given matches any entity, or with
  ``--strict`` only entities without that type (``--user-any --strict``: the users' own quotas, as
  ``kafka-configs.sh --describe --entity-type users`` lists them). Columns: user, client id, ip
  (``<default>`` for the default entity, ``-`` for no part), quotas; ``-o json``: the same rows (null
  for no part), ``quotas`` an object of numbers.
- ``set ENTITY --producer-byte-rate N --consumer-byte-rate N --request-percentage P
  --controller-mutation-rate R --connection-creation-rate N`` (any of them, at least one), or
  ``--add-config 'KEY=VALUE,...'`` as kafka-configs.sh takes it: sets those keys, keeps the others;
  prints them.
- ``remove ENTITY --key KEY ...`` (``--delete-config``; ``KEY,KEY`` or repeated) or ``--all``: removes
  those keys (every key with ``--all``; a key not set is no error); prints them.

``set`` and ``remove`` take ``--validate-only``: the broker checks the change and writes nothing. The
values are checked before the cluster is asked: a byte rate is a whole number, every value positive
(remove a key to lift its quota), a key one of those of the entity. kafkactl refuses ``<default>`` as a name (that is
``--user-default``), so the ``<default>`` of its output is always the default entity.

Exit codes as for every command (:mod:`kafkactl.errors`), and: no entity, no value, a bad value or key, or
a change the broker refuses (INVALID_REQUEST) is exit 2; a principal without DESCRIBE_CONFIGS (``list``)
or ALTER_CONFIGS (``set``, ``remove``) on the cluster (CLUSTER_AUTHORIZATION_FAILED) exit 1.
"""

from __future__ import annotations

import math
from typing import List, Optional

import typer

from broker.client import ANY_ENTITY, DEFAULT_ENTITY, ClientQuotaEntity, ClientQuotaFilterComponent
from kafkactl._common import admin_client, output_format
from kafkactl.errors import CliError, invalid_request_is_bad_input
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="List, set and remove client quotas (per user and client id, or client IP address).",
                  no_args_is_help=True)

#: The quota keys, each with whether its values are whole numbers.
KEYS = {"producer_byte_rate": True, "consumer_byte_rate": True, "request_percentage": False,
        "controller_mutation_rate": False, "connection_creation_rate": True}
#: The keys of an IP address entity (the others are those of users and client ids)
IP_KEYS = ("connection_creation_rate",)
DEFAULT_NAME = "<default>"
COLUMNS = ["user", "client_id", "ip", "quotas"]


# -- option values ----------------------------------------------------------------------------

def _key(text: str) -> str:
    key = text.strip().replace("-", "_").lower()
    if key not in KEYS:
        raise CliError(f"unknown quota key {text.strip()!r} (one of {', '.join(KEYS)})")
    return key


def _value(key: str, text: str) -> int | float:
    """``text`` as a value of ``key``: a positive number, whole for a byte rate."""
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
    if KEYS[key]:
        if not (math.isfinite(value) and value.is_integer() and value > 0):
            unit = "connections" if key in IP_KEYS else "bytes"
            raise CliError(f"{key} is a whole number of {unit} per second above 0, not {text!r}")
        return int(value)
    if not (math.isfinite(value) and value > 0):
        raise CliError(f"{key} is a number above 0, not {text!r} (remove the key to lift the quota)")
    return value


def _flag(key: str):
    """The callback of the option setting ``key``: its value checked, as :func:`_value` does."""
    def check(value: Optional[str]) -> Optional[int | float]:
        if value is None:
            return None
        try:
            return _value(key, value)
        except CliError as exc:
            raise typer.BadParameter(str(exc)) from None
    return check


def _add_config(items: Optional[List[str]]) -> dict[str, int | float]:
    """``--add-config 'k=v,k=v'`` (repeatable) as ``{key: value}``."""
    out: dict[str, int | float] = {}
    for item in items or ():
        for pair in item.split(","):
            name, sep, text = pair.partition("=")
            if not sep or not name.strip():
                raise CliError(f"bad --add-config entry {pair!r}: expected KEY=VALUE[,KEY=VALUE...]")
            key = _key(name)
            if key in out:
                raise CliError(f"{key} is given twice")
            out[key] = _value(key, text)
    return out


def _name(value: Optional[str], what: str) -> Optional[str]:
    if value is None:
        return None
    if not value:
        raise CliError(f"the {what} is empty")
    if value == DEFAULT_NAME:
        raise CliError(f"{DEFAULT_NAME} is not a {what}: use --{what.replace(' ', '-')}-default")
    return value


def _part(name: Optional[str], default: bool, what: str):
    """The entity part given by ``--<what> NAME`` or ``--<what>-default`` (None: neither)."""
    name = _name(name, what)
    if name is not None and default:
        flag = what.replace(" ", "-")
        raise CliError(f"give --{flag} NAME or --{flag}-default, not both")
    return DEFAULT_ENTITY if default else name


def _entity(user: Optional[str], user_default: bool, client_id: Optional[str], client_default: bool,
            ip: Optional[str] = None, ip_default: bool = False) -> ClientQuotaEntity:
    user_part = _part(user, user_default, "user")
    client_part = _part(client_id, client_default, "client id")
    ip_part = _part(ip, ip_default, "ip")
    if user_part is None and client_part is None and ip_part is None:
        raise CliError("give the entity: --user NAME or --user-default, and/or --client-id ID or --client-id-default; "
                       "or --ip ADDRESS or --ip-default")
    if ip_part is not None and (user_part is not None or client_part is not None):
        raise CliError("an IP address entity stands alone: --ip (or --ip-default) without --user or --client-id")
    return ClientQuotaEntity(user_part, client_part, ip_part)


def _keys_of(entity: ClientQuotaEntity) -> list[str]:
    return [key for key in KEYS if (key in IP_KEYS) == (entity.ip is not None)]


def _check_keys(entity: ClientQuotaEntity, keys) -> None:
    wrong = [key for key in keys if key not in _keys_of(entity)]
    if wrong:
        kind = "an IP address" if entity.ip is not None else "a user or client id"
        raise CliError(f"{', '.join(wrong)}: not a quota of {kind} (those: {', '.join(_keys_of(entity))})")


def _shown(part) -> Optional[str]:
    return DEFAULT_NAME if part is DEFAULT_ENTITY else part


USER = typer.Option(None, "--user", metavar="NAME", help="The user (a principal's name: alice for User:alice).")
USER_DEFAULT = typer.Option(False, "--user-default", help="The default user: every user without a quota of its own.")
CLIENT_ID = typer.Option(None, "--client-id", metavar="ID", help="The client id.")
CLIENT_ID_DEFAULT = typer.Option(False, "--client-id-default",
                                 help="The default client id: every client id without a quota of its own.")
IP = typer.Option(None, "--ip", metavar="ADDRESS", help="A client IP address (alone: no user or client id).")
IP_DEFAULT = typer.Option(False, "--ip-default", help="The default IP address: every address without a quota of its own.")
VALIDATE_ONLY = typer.Option(False, "--validate-only", help="Have the broker check the change; write nothing.")


# -- commands ---------------------------------------------------------------------------------

@app.command("list")
def list_quotas(
    ctx: typer.Context,
    user: Optional[str] = USER,
    user_default: bool = USER_DEFAULT,
    user_any: bool = typer.Option(False, "--user-any", help="Any user, the default included."),
    client_id: Optional[str] = CLIENT_ID,
    client_id_default: bool = CLIENT_ID_DEFAULT,
    client_id_any: bool = typer.Option(False, "--client-id-any", help="Any client id, the default included."),
    ip: Optional[str] = IP,
    ip_default: bool = IP_DEFAULT,
    ip_any: bool = typer.Option(False, "--ip-any", help="Any IP address, the default included."),
    strict: bool = typer.Option(False, "--strict", help="Only entities without the types not given."),
) -> None:
    """The quotas of every entity the filter matches (every entity with quotas without one)."""
    components = []
    for kind, name, default, any_, what in (("user", user, user_default, user_any, "user"),
                                            ("client-id", client_id, client_id_default, client_id_any, "client id"),
                                            ("ip", ip, ip_default, ip_any, "ip")):
        flag = what.replace(" ", "-")
        if (name is not None) + default + any_ > 1:
            raise CliError(f"give one of --{flag} NAME, --{flag}-default, --{flag}-any")
        match = ANY_ENTITY if any_ else _part(name, default, what)
        if match is not None:
            components.append(ClientQuotaFilterComponent(kind, match))
    with admin_client(ctx) as admin, invalid_request_is_bad_input():
        found = admin.describe_client_quotas(components, strict=strict)
    rows = [{"user": _shown(e.user), "client_id": _shown(e.client_id), "ip": _shown(e.ip), "quotas": values}
            for e, values in found.items()]
    fmt = output_format(ctx)
    if fmt is OutputFormat.table and not rows:
        print("no client quotas")
        return
    emit(rows, fmt, COLUMNS)


@app.command("set")
def set_quotas(
    ctx: typer.Context,
    user: Optional[str] = USER,
    user_default: bool = USER_DEFAULT,
    client_id: Optional[str] = CLIENT_ID,
    client_id_default: bool = CLIENT_ID_DEFAULT,
    producer_byte_rate: Optional[str] = typer.Option(None, "--producer-byte-rate", metavar="BYTES/S",
                                                     callback=_flag("producer_byte_rate"),
                                                     help="Bytes per second produced (a whole number)."),
    consumer_byte_rate: Optional[str] = typer.Option(None, "--consumer-byte-rate", metavar="BYTES/S",
                                                     callback=_flag("consumer_byte_rate"),
                                                     help="Bytes per second fetched (a whole number)."),
    request_percentage: Optional[str] = typer.Option(None, "--request-percentage", metavar="PERCENT",
                                                     callback=_flag("request_percentage"),
                                                     help="Percent of the broker's time on the client's requests."),
    controller_mutation_rate: Optional[str] = typer.Option(None, "--controller-mutation-rate", metavar="RATE",
                                                           callback=_flag("controller_mutation_rate"),
                                                           help="Partitions created or deleted per second."),
    connection_creation_rate: Optional[str] = typer.Option(
        None, "--connection-creation-rate", metavar="RATE", callback=_flag("connection_creation_rate"),
        help="New connections per second from an IP address (with --ip or --ip-default)."),
    ip: Optional[str] = IP,
    ip_default: bool = IP_DEFAULT,
    add_config: Optional[List[str]] = typer.Option(None, "--add-config", metavar="KEY=VALUE[,KEY=VALUE...]",
                                                   help="Keys and values as kafka-configs.sh takes them."),
    validate_only: bool = VALIDATE_ONLY,
) -> None:
    """Set quotas of one entity (the keys not given are kept); prints them."""
    entity = _entity(user, user_default, client_id, client_id_default, ip, ip_default)
    values = _add_config(add_config)
    for key, value in (("producer_byte_rate", producer_byte_rate), ("consumer_byte_rate", consumer_byte_rate),
                       ("request_percentage", request_percentage),
                       ("controller_mutation_rate", controller_mutation_rate),
                       ("connection_creation_rate", connection_creation_rate)):
        if value is None:
            continue
        if key in values:
            raise CliError(f"{key} is given twice (--{key.replace('_', '-')} and --add-config)")
        values[key] = value
    if not values:
        raise CliError("give a quota: --producer-byte-rate, --consumer-byte-rate, --request-percentage, "
                       "--controller-mutation-rate, --connection-creation-rate or --add-config KEY=VALUE")
    _check_keys(entity, values)
    values = {key: values[key] for key in KEYS if key in values}
    with admin_client(ctx) as admin, invalid_request_is_bad_input():
        admin.alter_client_quotas({entity: values}, validate_only=validate_only)
    if output_format(ctx) is OutputFormat.table:
        done = "valid, nothing written: would set" if validate_only else "set"
        print(f"{done} {', '.join(f'{k}={v}' for k, v in values.items())} for {entity}")
    else:
        emit({"user": _shown(entity.user), "client_id": _shown(entity.client_id), "ip": _shown(entity.ip),
              "set": values, "validate_only": validate_only}, output_format(ctx))


@app.command("remove")
def remove_quotas(
    ctx: typer.Context,
    user: Optional[str] = USER,
    user_default: bool = USER_DEFAULT,
    client_id: Optional[str] = CLIENT_ID,
    client_id_default: bool = CLIENT_ID_DEFAULT,
    ip: Optional[str] = IP,
    ip_default: bool = IP_DEFAULT,
    keys: Optional[List[str]] = typer.Option(None, "--key", "--delete-config", metavar="KEY[,KEY...]",
                                             help=f"A key to remove ({', '.join(KEYS)}); may be repeated."),
    every_key: bool = typer.Option(False, "--all", help="Remove every quota of the entity."),
    validate_only: bool = VALIDATE_ONLY,
) -> None:
    """Remove quotas of one entity (a key not set is no error); prints the keys removed."""
    entity = _entity(user, user_default, client_id, client_id_default, ip, ip_default)
    named = {_key(k) for item in keys or () for k in item.split(",")}
    if named and every_key:
        raise CliError("give --key or --all, not both")
    if not (named or every_key):
        raise CliError(f"give the quotas to remove: --key KEY ({', '.join(_keys_of(entity))}) or --all")
    _check_keys(entity, sorted(named))
    removed = [key for key in _keys_of(entity) if every_key or key in named]
    with admin_client(ctx) as admin, invalid_request_is_bad_input():
        admin.alter_client_quotas({entity: dict.fromkeys(removed)}, validate_only=validate_only)
    if output_format(ctx) is OutputFormat.table:
        done = "valid, nothing written: would remove" if validate_only else "removed"
        print(f"{done} {'every quota' if every_key else ', '.join(removed)} of {entity}")
    else:
        emit({"user": _shown(entity.user), "client_id": _shown(entity.client_id), "ip": _shown(entity.ip),
              "removed": removed, "validate_only": validate_only}, output_format(ctx))
