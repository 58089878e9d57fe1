"""``python -m mirror --config FILE`` (console script ``kafka-mirror``).

Exit codes: 0 after SIGTERM/SIGINT (in-flight batches finished, positions
committed), 2 for a configuration that cannot run (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from .config import MirrorConfigError, load
from .flow import FlowRunner
from .metrics import MirrorMetrics


async def _run(config, metrics: MirrorMetrics) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    runners = [FlowRunner(config, flow, metrics, stopping) for flow in config.flows]
    await asyncio.gather(*(r.run() for r in runners))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka-mirror", description="Mirror topics and consumer group "
                                     "offsets between Kafka-compatible clusters.")
    parser.add_argument("--config", required=True, help="YAML file: clusters, flows, metrics.port")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load(args.config)
    except MirrorConfigError as exc:
        print(f"kafka-mirror: {exc}", file=sys.stderr)
        return 2
    metrics = MirrorMetrics()
    where = "off"
    if config.metrics_port >= 0:
        try:
            port = metrics.start_http(config.metrics_host, config.metrics_port)
        except OSError as exc:
            print(f"kafka-mirror: metrics.port {config.metrics_port}: {exc.strerror}", file=sys.stderr)
            return 2
        where = f"{config.metrics_host}:{port}"
    print(f"mirror ready: flows={','.join(f.name for f in config.flows)} metrics={where}", file=sys.stderr,
          flush=True)
    try:
        asyncio.run(_run(config, metrics))
    finally:
        metrics.stop_http()
    return 0


if __name__ == "__main__":
    sys.exit(main())
