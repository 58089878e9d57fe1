"""A Prometheus exporter for one ZooKeeper server, under the names of ZooKeeper's own Prometheus provider.

ZooKeeper 3.6+ serves Prometheus metrics itself with
``metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider``
(port 7000 by default), but that provider is a separate jar which Debian's
``zookeeper`` package does not ship. This exporter is the fallback: each scrape
of its ``/metrics`` asks the server's ``mntr`` four-letter word and serves
every figure under the provider's name (``synced_followers``, ``znode_count``,
...; the mapping is in :mod:`zookeeper_exporter.mntr`), so rules and dashboards
written for the provider work unchanged. Beside them:

- ``zookeeper_up``: 1 when the server answered ``mntr`` with its figures, 0
  when it could not be reached, did not answer in time, answered that it is
  not serving requests (a member without quorum) or that ``mntr`` is not in
  ``4lw.commands.whitelist``. A 0 scrape still answers 200, with no other
  ZooKeeper figure; Prometheus' own ``up`` is then the exporter's, not the
  server's;
- ``zookeeper_server_state{state}``: 1 for the server's state (``leader``,
  ``follower``, ``observer``, ``standalone``, ...).

Run one exporter per ZooKeeper server (``kafkapy-zookeeper-exporter`` or
``python -m zookeeper_exporter``, see ``__main__``). Thread-safe: every scrape
opens its own connection.
"""

from __future__ import annotations

import logging
import socket

from prometheus_client.core import GaugeMetricFamily

from .mntr import MntrError, families, parse

log = logging.getLogger(__name__)


def four_letter(host: str, port: int, word: str, timeout: float) -> str:
    """Send a four-letter word and read the answer until ZooKeeper closes the connection."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


class ZooKeeperCollector:
    """A prometheus_client custom collector: one ``mntr`` round trip per ``collect()``."""

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._last_error: str | None = None

    def collect(self):
        try:
            metrics = families(parse(four_letter(self.host, self.port, "mntr", self.timeout)))
        except (OSError, MntrError) as exc:
            self._note(f"{exc.__class__.__name__}: {exc}" if isinstance(exc, OSError) else str(exc))
            metrics = []
        else:
            self._note(None)
        up = GaugeMetricFamily("zookeeper_up", "1 when ZooKeeper answered mntr with its metrics, else 0.",
                               value=1 if metrics else 0)
        return [up, *metrics]

    def _note(self, error: str | None) -> None:
        # one line when the state changes, not one per scrape
        if error != self._last_error:
            if error is None:
                log.info("ZooKeeper at %s:%d answers mntr again", self.host, self.port)
            else:
                log.warning("ZooKeeper at %s:%d: %s", self.host, self.port, error)
            self._last_error = error
