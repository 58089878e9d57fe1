"""``kafkactl``: the operator CLI.

One module per noun (``log``, later ``topics``, ``groups`` ...), each a Typer
sub-application registered here. Global options come before the command::

    kafkactl [--bootstrap-server HOST:PORT] [--output table|json|yaml] [--debug] NOUN VERB ...

User errors print one line and exit with the codes in :mod:`kafkactl.errors`;
``--debug`` (or ``KAFKACTL_DEBUG=1``) shows tracebacks instead.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer

try:  # recent Typer ships its own copy of click
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older Typer on click
    from click.exceptions import NoArgsIsHelpError, UsageError

from kafkactl import cluster as cluster_cmd
from kafkactl import configs as configs_cmd
from kafkactl import consume as consume_cmd
from kafkactl import groups as groups_cmd
from kafkactl import log as log_cmd
from kafkactl import offsets as offsets_cmd
from kafkactl import perf as perf_cmd
from kafkactl import produce as produce_cmd
from kafkactl import topics as topics_cmd
from kafkactl.errors import EXIT_PROBLEM, EXIT_USAGE, CliError
from kafkactl.output import OutputFormat

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CONFIG_FILE = Path(os.environ.get("KAFKACTL_CONFIG", Path.home() / ".config" / "kafkactl" / "config.yaml"))

app = typer.Typer(
    name="kafkactl",
    help="Operate a Kafka-compatible cluster: topics, configs, groups, offsets and log files.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)


@dataclass
class Settings:
    """What the global options resolved to; commands read it from ``ctx.obj``."""

    bootstrap_server: str
    output: OutputFormat
    debug: bool


def _configured_bootstrap() -> str:
    env = os.environ.get("KAFKACTL_BOOTSTRAP")
    if env:
        return env
    if CONFIG_FILE.is_file():
        import yaml

        try:
            data = yaml.safe_load(CONFIG_FILE.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise CliError(f"cannot read config file {CONFIG_FILE}: {exc}") from exc
        if isinstance(data, dict) and data.get("bootstrap_server"):
            return str(data["bootstrap_server"])
    return DEFAULT_BOOTSTRAP


@app.callback()
def main(
    ctx: typer.Context,
    bootstrap_server: Optional[str] = typer.Option(
        None,
        "--bootstrap-server",
        "-b",
        help="HOST:PORT[,HOST:PORT...] of the cluster (default: $KAFKACTL_BOOTSTRAP, the config file, 127.0.0.1:9092).",
    ),
    output: OutputFormat = typer.Option(OutputFormat.table, "--output", "-o", help="Output format."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    ctx.obj = Settings(bootstrap_server or _configured_bootstrap(), output, debug)


app.add_typer(log_cmd.app, name="log")
app.add_typer(topics_cmd.app, name="topics")
app.add_typer(configs_cmd.app, name="configs")
app.add_typer(cluster_cmd.app, name="cluster")
app.add_typer(groups_cmd.app, name="groups")
app.add_typer(offsets_cmd.app, name="offsets")
app.add_typer(perf_cmd.app, name="perf")
app.command("produce")(produce_cmd.produce)
app.command("consume")(consume_cmd.consume)


def run() -> None:
    """Console-script entry point: runs the app and maps errors to one line + exit code."""
    debug = "--debug" in sys.argv[1:] or os.environ.get("KAFKACTL_DEBUG") == "1"
    try:
        code = app(standalone_mode=False)
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
    except Exception as exc:  # noqa: BLE001 - the last line of defence for users
        if debug:
            raise
        print(f"kafkactl: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_PROBLEM)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    run()
