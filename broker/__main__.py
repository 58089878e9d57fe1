"""``python -m broker [--config FILE] [--override key=value ...] [--log-level LEVEL] [--version]``: run one broker.

The ``kafka-broker`` script is the same command. ``--config`` takes our YAML or a
Kafka ``server.properties`` file (see :mod:`broker.config`); without it the
embedded single-node default (``configs/broker.yaml``) is used. A Kafka
property this broker does not implement gets one warning line on stderr.

Exit statuses and what is printed:

* ``--version`` prints ``kafkapy <version>`` (the installed package's) and exits 0;
* a bad argument (``--log-level LOUD``) or a bad configuration prints one line
  to stderr and exits 2; a configuration error names the property, the value
  and where it came from (the ``--override`` or the config file);
* a start that fails (a log dir locked by another process, a port in use, a
  foreign ``meta.properties``, ZooKeeper unreachable) prints one line
  ``broker: cannot start: ...`` and exits 1, having written no checkpoint and
  no clean-shutdown marker;
* once every listener is bound the broker prints exactly one line to stdout::

      broker ready: listener=127.0.0.1:PORT metrics=127.0.0.1:MPORT

  (``metrics=off`` when ``metrics.port`` is -1). SIGTERM or SIGINT shuts down
  gracefully (in-flight requests answered, logs flushed, checkpoints written)
  and exits 0;
* SIGQUIT (``kill -QUIT PID``) keeps the broker running and writes to stderr
  the stack of every thread and of every asyncio task (what a JVM's thread
  dump shows for a Kafka broker): what a broker that does not answer or does
  not stop is waiting on. The threads come first, then ``--- N asyncio
  task(s) ---``, the tasks, and ``--- end of the dump ---``; a blocked event
  loop writes the threads only;
* when every log dir has failed (JBOD: each disk gave an I/O error) the broker
  logs it, stops (writing nothing into the failed dirs), prints
  ``broker: stopped: every log dir has failed (...)`` and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import gc
import logging
import signal
import sys
from importlib import metadata

from broker.config import ConfigError, load_config, parse_overrides

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def version() -> str:
    """``kafkapy <version>`` from the installed package's metadata."""
    try:
        return f"kafkapy {metadata.version('kafkapy')}"
    except metadata.PackageNotFoundError:
        return "kafkapy (version unknown: the package is not installed)"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse adds the usage lines)
        self.exit(2, f"broker: {message}\n")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="python -m broker", description="Run a Kafka-compatible broker.")
    parser.add_argument("--config", metavar="FILE", help="YAML file or Kafka server.properties of broker properties")
    parser.add_argument(
        "--override", metavar="KEY=VALUE", action="append", default=[], help="set one property (repeatable)"
    )
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, metavar="LEVEL",
                        help=f"logging level: {', '.join(LOG_LEVELS)} (default INFO)")
    parser.add_argument("--version", action="version", version=version())
    return parser.parse_args(argv)


def _freeze_startup_heap() -> int:
    """Take what start-up built out of Python's garbage collection (``gc.freeze``).

    Start-up loads every log (segments, indexes, producer state, epochs) and
    the metadata: tens of objects per partition, all long-lived. A full
    collection walks every tracked object, so with thousands of partitions
    each one would stop the event loop for tens of milliseconds, every client
    waiting. One full collection first (so no garbage is frozen with the
    rest), then the survivors move to the permanent generation, which later
    collections skip. Reference counting still frees frozen objects that are
    dropped (a deleted topic's logs); a frozen object that ends up in a
    reference cycle is never freed, which start-up's objects (logs, metadata,
    the listeners) do not do. Returns how many objects were frozen.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def _dump_tasks() -> None:
    """Write the stack of every asyncio task to stderr (the task part of the SIGQUIT dump)."""
    tasks = asyncio.all_tasks()
    print(f"--- {len(tasks)} asyncio task(s) ---", file=sys.stderr)
    for task in tasks:
        task.print_stack(limit=20, file=sys.stderr)
    print("--- end of the dump ---", file=sys.stderr)
    sys.stderr.flush()


def _install_dump_on_sigquit(loop: asyncio.AbstractEventLoop) -> None:
    """SIGQUIT dumps every thread (faulthandler, at C level, so even a blocked event loop answers) and then, from
    the event loop, every asyncio task; the broker runs on."""
    loop.add_signal_handler(signal.SIGQUIT, _dump_tasks)
    faulthandler.register(signal.SIGQUIT, file=sys.stderr, all_threads=True, chain=True)


async def _serve(config) -> int:
    from broker.server.broker import Broker

    broker = Broker(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    _install_dump_on_sigquit(loop)
    await broker.start()  # a failed start undoes itself and writes nothing
    broker.metrics.gc_frozen_objects.set(_freeze_startup_heap())
    first = broker.endpoints[0]
    host = config.listeners[0].host or first.host
    metrics = f"{host}:{broker.metrics_port}" if broker.metrics_port is not None else "off"
    sys.stdout.write(f"broker ready: listener={host}:{first.port} metrics={metrics}\n")
    sys.stdout.flush()
    stopping = asyncio.ensure_future(stop.wait())
    failed = asyncio.ensure_future(broker.fatal.wait())
    await asyncio.wait((stopping, failed), return_when=asyncio.FIRST_COMPLETED)
    for waiter in (stopping, failed):
        waiter.cancel()
    await broker.stop()
    if broker.fatal.is_set():
        print(f"broker: stopped: {broker.fatal_reason}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = load_config(args.config, parse_overrides(args.override))
    except ConfigError as exc:
        print(f"broker: config error: {exc}", file=sys.stderr)
        return 2
    for name in config.ignored:
        logging.getLogger("broker.config").warning(
            "%s: a Kafka broker property this broker does not implement; ignored", name)
    from broker.cluster import StoreError

    try:
        return asyncio.run(_serve(config))
    except (OSError, ValueError, StoreError) as exc:
        # A log dir locked by another process, a port in use, a foreign meta.properties, ZooKeeper
        # unreachable, a broker id registered by another broker...
        print(f"broker: cannot start: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
