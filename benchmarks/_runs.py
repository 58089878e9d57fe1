"""What the cluster, reassignment, mirror and shutdown benchmarks share around
their measurements.

* :func:`arguments`: the command line every one of them takes, ``--short``
  (a smoke test, not a measurement) and ``--json FILE`` (the figures written
  there, indented JSON, by :func:`write_json`), with its own options added by
  the caller.
* :func:`alternate`: each case measured in turn, A B A B, ``reps`` times, so a
  machine that drifts slows every case alike; returns each case's results in
  the order measured. :func:`medians` takes each case's median.
* :func:`wait_for`: polls ``check`` every ``interval_s`` until it returns a true
  value, which it returns; after ``limit_s`` it raises ``RuntimeError`` naming
  what it waited for (a guard against a hang, never a figure).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

T = TypeVar("T")
LIMIT_S = 120


def arguments(prog: str, short_help: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--short", action="store_true", help=short_help)
    parser.add_argument("--json", metavar="FILE", help="write the figures to FILE as JSON")
    return parser


def write_json(path: str | None, result: Any) -> None:
    if path:
        Path(path).write_text(json.dumps(result, indent=2))


def alternate(cases: dict[str, Any], reps: int, measure: Callable[[str, Any, int], T]) -> dict[str, list[T]]:
    """``measure(name, case, rep)`` for every case in turn, ``reps`` times: {name: [results]}."""
    runs: dict[str, list[T]] = {name: [] for name in cases}
    for rep in range(reps):
        for name, case in cases.items():
            runs[name].append(measure(name, case, rep))
    return runs


def medians(runs: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in runs.items()}


def wait_for(check: Callable[[], T], what: str, limit_s: float = LIMIT_S, interval_s: float = 0.1) -> T:
    deadline = time.monotonic() + limit_s
    while not (value := check()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(interval_s)
    return value
