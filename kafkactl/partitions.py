"""``kafkactl partitions``: operations on the leadership of partitions (``elect-leaders``, :mod:`kafkactl.elect_leaders`)."""

from __future__ import annotations

import typer

from kafkactl.elect_leaders import elect_leaders

app = typer.Typer(help="Elect partition leaders.", no_args_is_help=True)
app.command("elect-leaders")(elect_leaders)
