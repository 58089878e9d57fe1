"""``kafkactl partitions``: operations on the leadership and placement of partitions (``elect-leaders``,
:mod:`kafkactl.elect_leaders`; ``reassign``, :mod:`kafkactl.reassign`)."""

from __future__ import annotations

import typer

from kafkactl.elect_leaders import elect_leaders
from kafkactl.reassign import reassign

app = typer.Typer(help="Elect partition leaders, move partitions between brokers.", no_args_is_help=True)
app.command("elect-leaders")(elect_leaders)
app.command("reassign")(reassign)
