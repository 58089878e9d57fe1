"""``python -m zookeeper_exporter`` (console script ``kafkapy-zookeeper-exporter``).

Serves ``/metrics`` on ``--host``:``--port`` (0.0.0.0:7000, the Prometheus
provider's ``metricsProvider.httpHost`` and ``httpPort`` defaults) for the
ZooKeeper server at ``--zookeeper`` (127.0.0.1:2181). Prints
``zookeeper exporter ready: zookeeper=HOST:PORT metrics=HOST:PORT`` on stderr
once it listens (``--port 0``: an ephemeral port, named there). Exit codes: 0
after SIGTERM/SIGINT, 2 for bad arguments or a port it cannot bind (one line
on stderr). A ZooKeeper that is down is no reason to exit: the scrape says so
(``zookeeper_up 0``).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from prometheus_client import CollectorRegistry, start_http_server

from . import ZooKeeperCollector

PROG = "kafkapy-zookeeper-exporter"


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Serve a ZooKeeper server's mntr figures as "
                                     "Prometheus metrics, under the names of ZooKeeper's Prometheus provider.")
    parser.add_argument("--zookeeper", type=_address, default=("127.0.0.1", 2181), metavar="HOST:PORT",
                        help="the server's client port (default 127.0.0.1:2181)")
    parser.add_argument("--host", default="0.0.0.0", help="address to serve /metrics on (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=7000, help="port to serve /metrics on (default 7000)")
    parser.add_argument("--timeout", type=_positive, default=5.0,
                        help="seconds to wait for mntr's answer (default 5; keep it under the scrape timeout)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    zk_host, zk_port = args.zookeeper
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ZooKeeperCollector(zk_host, zk_port, args.timeout))
    try:
        server, _thread = start_http_server(args.port, args.host, registry)  # a daemon thread, quiet per request
    except (OSError, OverflowError) as exc:
        print(f"{PROG}: cannot serve on {args.host}:{args.port}: {getattr(exc, 'strerror', None) or exc}",
              file=sys.stderr)
        return 2
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    print(f"zookeeper exporter ready: zookeeper={zk_host}:{zk_port} metrics={args.host}:{server.server_port}",
          file=sys.stderr, flush=True)
    stopping.wait()
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
