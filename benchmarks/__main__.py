"""``python -m benchmarks [--full] [NAME ...]``: run the benchmark modules.

By default every module runs in its short form (``--short``), one after the
other, each in its own process (``python -m benchmarks.NAME --short``) so that
one module's brokers, threads or memory never touch the next one's figures.
``--full`` runs the default (long) form instead; names select modules. A module
that does not exist (yet) is skipped with a message; the exit status is the
first non-zero status of a module that ran.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

MODULES = ("log_bench", "client_bench", "group_bench", "broker_bench", "mirror_bench", "pipeline_bench",
           "idempotence_bench", "cluster_bench", "shutdown_bench", "reassign_bench", "produce_floor", "tls_bench",
           "security_bench", "quota_bench", "fetch_session_bench", "auth_bench", "share_bench")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        print(__doc__)
        return 0
    full = "--full" in args
    names = [a for a in args if a != "--full"] or list(MODULES)
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        print(f"benchmarks: unknown module(s) {', '.join(unknown)}; known: {', '.join(MODULES)}", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        module = f"{__package__ or 'benchmarks'}.{name}"
        if importlib.util.find_spec(module) is None:
            print(f"== {name}: not present, skipped", flush=True)
            continue
        print(f"== {name} ({'full' if full else 'short'})", flush=True)
        code = subprocess.call([sys.executable, "-m", module, *([] if full else ["--short"])])
        if code:
            print(f"== {name}: exit status {code}", flush=True)
            status = status or code
    return status


if __name__ == "__main__":
    sys.exit(main())
