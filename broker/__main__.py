"""``python -m broker [--config FILE] [--override key=value ...]``: run one broker.

Without ``--config`` the embedded single-node default (``configs/broker.yaml``)
is used. A bad configuration prints one line to stderr and exits with status 2.
Once every listener is bound the broker prints exactly one line to stdout::

    broker ready: listener=127.0.0.1:PORT metrics=127.0.0.1:MPORT

(``metrics=off`` when ``metrics.port`` is -1). SIGTERM or SIGINT shuts down
gracefully (in-flight requests answered, logs flushed, checkpoints written)
and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from broker.config import ConfigError, load_config, parse_overrides


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m broker", description="Run a Kafka-compatible broker.")
    parser.add_argument("--config", metavar="FILE", help="YAML file of Kafka broker properties")
    parser.add_argument(
        "--override", metavar="KEY=VALUE", action="append", default=[], help="set one property (repeatable)"
    )
    parser.add_argument("--log-level", default="INFO", help="Python logging level (default INFO)")
    return parser.parse_args(argv)


async def _serve(config) -> int:
    from broker.server.broker import Broker

    broker = Broker(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()  # a failed start undoes itself and writes nothing
    first = broker.endpoints[0]
    host = config.listeners[0].host or first.host
    metrics = f"{host}:{broker.metrics_port}" if broker.metrics_port is not None else "off"
    sys.stdout.write(f"broker ready: listener={host}:{first.port} metrics={metrics}\n")
    sys.stdout.flush()
    await stop.wait()
    await broker.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = load_config(args.config, parse_overrides(args.override))
    except ConfigError as exc:
        print(f"broker: config error: {exc}", file=sys.stderr)
        return 2
    from broker.cluster import StoreError

    try:
        return asyncio.run(_serve(config))
    except (OSError, ValueError, StoreError) as exc:
        # A port in use, an unreadable or foreign log dir (meta.properties of another cluster), ZooKeeper
        # unreachable, a broker id registered by another broker...
        print(f"broker: cannot start: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
