"""Rendering results as human tables or as JSON / YAML for scripts.

Commands build plain data (lists of dicts with the same keys, or one dict) and
hand it to :func:`emit`; the global ``--output`` option picks the form.
"""

from __future__ import annotations

import enum
import json
import sys
from typing import Any, Iterable, Sequence

import yaml


class OutputFormat(str, enum.Enum):
    table = "table"
    json = "json"
    yaml = "yaml"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={_cell(v)}" for k, v in value.items())
    return str(value)


def render_table(rows: Sequence[dict], columns: Sequence[str] | None = None) -> str:
    """Left-aligned columns with an upper-case header line, like Kafka's own tools."""
    if not rows:
        return ""
    columns = list(columns or rows[0].keys())
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


def emit(data: Any, fmt: OutputFormat, columns: Sequence[str] | None = None, out=None) -> None:
    """Write ``data`` (a list of row dicts, or one dict) in the chosen format."""
    out = out or sys.stdout
    if fmt is OutputFormat.json:
        json.dump(data, out, indent=2, default=str)
        out.write("\n")
    elif fmt is OutputFormat.yaml:
        yaml.safe_dump(data, out, sort_keys=False, default_flow_style=False)
    else:
        if isinstance(data, dict):
            rows = [{"key": k, "value": v} for k, v in data.items()]
            text = render_table(rows, ["key", "value"])
        else:
            text = render_table(list(data), columns)
        if text:
            out.write(text + "\n")


def emit_names(names: Sequence[str], fmt: OutputFormat) -> None:
    """A list of names: one per line in a table, a list in JSON or YAML."""
    if fmt is OutputFormat.table:
        for name in names:
            print(name)
    else:
        emit(list(names), fmt)


def emit_lines(objects: Iterable[dict], out=None) -> None:
    """One JSON object per line (for streams such as consumed records)."""
    out = out or sys.stdout
    for obj in objects:
        out.write(json.dumps(obj, default=str) + "\n")
