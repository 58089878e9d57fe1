"""``kafkactl``: the operator CLI.

One module per noun (``log``, ``topics``, ``groups`` ...), each a Typer
sub-application registered here. Global options go before the command or
after it, as with Kafka's own tools and kubectl::

    kafkactl [GLOBAL OPTIONS] NOUN VERB ... [GLOBAL OPTIONS]

    --bootstrap-server/-b HOST:PORT   --output/-o table|json|yaml
    --command-config FILE             --debug            --version

They are declared once, on the root callback; :func:`build_command` copies
them onto every sub-command, where a callback records the value in the
:class:`~kafkactl.settings.Settings` of the root context (the last one given
wins). User errors print one line and exit with the codes in
:mod:`kafkactl.errors`; ``--debug`` (or ``KAFKACTL_DEBUG=1``) shows tracebacks
instead.
"""

from __future__ import annotations

import copy
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Optional

import typer

try:  # recent Typer ships its own copy of click
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older Typer on click
    from click.exceptions import NoArgsIsHelpError, UsageError

from kafkactl import acls as acls_cmd
from kafkactl import client_metrics as client_metrics_cmd
from kafkactl import cluster as cluster_cmd
from kafkactl import configs as configs_cmd
from kafkactl import consume as consume_cmd
from kafkactl import groups as groups_cmd
from kafkactl import log as log_cmd
from kafkactl import logdirs as logdirs_cmd
from kafkactl import mirror as mirror_cmd
from kafkactl import offsets as offsets_cmd
from kafkactl import partitions as partitions_cmd
from kafkactl import share_groups as share_groups_cmd
from kafkactl import perf as perf_cmd
from kafkactl import produce as produce_cmd
from kafkactl import quotas as quotas_cmd
from kafkactl import topics as topics_cmd
from kafkactl import transactions as transactions_cmd
from kafkactl import tokens as tokens_cmd
from kafkactl import users as users_cmd
from kafkactl.errors import EXIT_PROBLEM, EXIT_USAGE, CliError
from kafkactl.output import OutputFormat
from kafkactl.settings import Settings

app = typer.Typer(
    name="kafkactl",
    help="Operate a Kafka-compatible cluster: topics, configs, groups, offsets, transactions and log files.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)

GLOBAL_OPTIONS = ("bootstrap_server", "output", "command_config", "debug", "version")


def _version() -> str:
    try:
        return metadata.version("kafkapy")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
        return "unknown"


def _show_version(value: bool) -> None:
    if value:
        print(f"kafkactl {_version()}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    bootstrap_server: Optional[str] = typer.Option(
        None,
        "--bootstrap-server",
        "-b",
        help="HOST:PORT[,HOST:PORT...] of the cluster (default: $KAFKACTL_BOOTSTRAP, the config file, 127.0.0.1:9092).",
    ),
    output: Optional[OutputFormat] = typer.Option(None, "--output", "-o", help="Output format: table (the default), json or yaml."),
    command_config: Optional[Path] = typer.Option(
        None, "--command-config", metavar="FILE",
        help="Client settings from a Kafka tool's properties file (client.id, request.timeout.ms, ...).",
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_show_version,
                                 help="Print kafkactl's version and exit."),
) -> None:
    ctx.obj = Settings(bootstrap_server, OutputFormat(output or OutputFormat.table), debug, command_config)


def _set_after_command(ctx, param, value) -> None:
    """Callback of a global option given after the command: it overrides the one before."""
    if value is None or value is False:  # not given here
        return
    if param.name == "output":
        value = OutputFormat(value)
    elif param.name == "command_config":
        value = Path(value)
    setattr(ctx.find_root().obj, param.name, value)

app.add_typer(log_cmd.app, name="log")
app.add_typer(logdirs_cmd.app, name="log-dirs")
app.add_typer(topics_cmd.app, name="topics")
app.add_typer(configs_cmd.app, name="configs")
app.add_typer(cluster_cmd.app, name="cluster")
app.add_typer(groups_cmd.app, name="groups")
app.add_typer(share_groups_cmd.app, name="share-groups")
app.add_typer(partitions_cmd.app, name="partitions")
app.add_typer(offsets_cmd.app, name="offsets")
app.add_typer(perf_cmd.app, name="perf")
app.add_typer(mirror_cmd.app, name="mirror")
app.add_typer(transactions_cmd.app, name="transactions")
app.add_typer(users_cmd.app, name="users")
app.add_typer(tokens_cmd.app, name="delegation-tokens")
app.add_typer(acls_cmd.app, name="acls")
app.add_typer(quotas_cmd.app, name="quotas")
app.add_typer(client_metrics_cmd.app, name="client-metrics")
app.command("produce")(produce_cmd.produce)
app.command("consume")(consume_cmd.consume)


def build_command():
    """The click command tree of :data:`app`, with the global options on every sub-command."""
    root = typer.main.get_command(app)
    shared = [p for p in root.params if p.name in GLOBAL_OPTIONS]

    def add(command) -> None:
        for p in shared:
            q = copy.copy(p)
            q.expose_value = False  # the command functions do not take them
            q.default = None
            if p.name != "version":  # --version keeps its own eager callback
                q.callback = _set_after_command
            command.params.append(q)
        for sub in getattr(command, "commands", {}).values():
            add(sub)

    for sub in root.commands.values():
        add(sub)
    return root


COMPLETION_OPTIONS = ("--show-completion", "--install-completion")


def _name_the_shell(argv: list[str]) -> None:
    """``--show-completion bash``: use the shell named rather than detecting one.

    Typer takes a shell name only when it cannot detect shells; otherwise it
    ignores the name and uses the shell it finds among the parent processes,
    so ``eval "$(kafkactl --show-completion bash)"`` failed ("Shell  not
    supported") where none is found (cron, a CI job, a process started
    without a terminal) and printed zsh's script under zsh. Its switch for
    that is an environment variable read when the command is built.
    """
    for i, arg in enumerate(argv[:-1]):
        if arg in COMPLETION_OPTIONS and not argv[i + 1].startswith("-"):
            os.environ["_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"] = "1"
            return


def run() -> None:
    """Console-script entry point: runs the app and maps errors to one line + exit code."""
    debug = "--debug" in sys.argv[1:] or os.environ.get("KAFKACTL_DEBUG") == "1"
    _name_the_shell(sys.argv[1:])
    try:
        code = build_command()(prog_name="kafkactl", standalone_mode=False)
    except NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except UsageError as exc:
        # one line instead of the usage box: the message, and where to find help
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        print(f"kafkactl: {exc.format_message()}{hint}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except typer.Abort:
        sys.exit(EXIT_PROBLEM)
    except CliError as exc:
        if debug:
            raise
        print(f"kafkactl: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except PermissionError as exc:
        # A file the command must read or write that this user may not: an unusable path (bad
        # input), whichever command met it, never a "problem found" (verify's exit 1 means corruption).
        if debug:
            raise
        print(f"kafkactl: permission denied: {exc.filename if exc.filename is not None else exc}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # noqa: BLE001 - the last line of defence for users
        if debug:
            raise
        print(f"kafkactl: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_PROBLEM)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    run()
