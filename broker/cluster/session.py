"""This broker's presence in the cluster, kept across metadata store sessions.

A broker is present through ephemeral nodes: ``/brokers/ids/<id>`` (its
registration) and, while it is controller, ``/controller``. They live exactly
as long as the store session (ZooKeeper's; the embedded store's session is the
process). :class:`BrokerSession` registers the broker and reacts to the
session states of :mod:`broker.cluster.store` as kazoo documents them (the
controller election is :class:`broker.cluster.controller.Controller`'s, which
listens to the same states):

* SUSPENDED: the connection dropped, the session may still be alive. Keep
  serving from what is known; take no decision that needs the store (nothing
  is written; the next write waits for the connection or fails).
* LOST: the session expired, so its ephemeral nodes are gone (the controller
  resigns). Once kazoo is CONNECTED again under a new session, register
  again, re-read the cluster id and call ``on_registered`` (the controller
  stands again), in a thread of its own (listeners run on kazoo's thread,
  which must not block).
  Renewal retries until it succeeds or the session object is closed; an id
  taken by another broker meanwhile is logged and ends the attempts.

Thread-safe: state changes arrive on kazoo's thread, ``register`` and
``close`` come from the broker's executor.
"""

from __future__ import annotations

import logging
import threading
from broker.cluster.metadata import BrokerIdInUseError, ClusterMetadata
from typing import Callable

from broker.cluster.store import SessionState, StoreError
from broker.cluster.znodes import BrokerRegistration

log = logging.getLogger("broker.cluster.session")

RETRY_MAX_S = 1.0  # the longest pause between renewal attempts


class BrokerSession:
    """Registration and controller role of one broker (see the module docstring)."""

    def __init__(self, metadata: ClusterMetadata, registration: BrokerRegistration,
                 cluster_id: str | None = None, on_registered: Callable[[], None] | None = None) -> None:
        self.metadata = metadata
        self.registration = registration
        self.cluster_id = cluster_id
        #: Called (on the renewal thread) once registered again under a new session.
        self.on_registered = on_registered
        #: How many times the session was lost (renewal proves it registered under the latest one).
        self.losses = 0
        #: Kafka's broker epoch (KIP-380): the czxid of our latest registration; -1 before the first
        self.broker_epoch = -1
        self._lock = threading.Lock()
        self._renewer: threading.Thread | None = None
        self._closed = threading.Event()

    @property
    def broker_id(self) -> int:
        return self.registration.broker_id

    def register(self) -> None:
        """Register (BrokerIdInUseError when the id is taken); blocking."""
        self.broker_epoch = self.metadata.register_broker(self.registration)
        self.metadata.store.add_session_listener(self._on_state)

    def close(self) -> None:
        """Stop reacting to the session (the store's own close ends the session)."""
        self._closed.set()
        self.metadata.store.remove_session_listener(self._on_state)
        renewer = self._renewer
        if renewer is not None:
            renewer.join(timeout=5)

    # -- session states (kazoo's thread: never block here) ----------------------------------
    def _on_state(self, state: SessionState) -> None:
        if state is SessionState.SUSPENDED:
            log.warning("broker %d: metadata store connection suspended; serving on, deciding nothing",
                        self.broker_id)
        elif state is SessionState.LOST:
            with self._lock:
                self.losses += 1
            log.warning("broker %d: metadata store session lost; registration gone", self.broker_id)
        elif state is SessionState.CONNECTED:
            with self._lock:
                if self.losses and self._renewer is None and not self._closed.is_set():
                    self._renewer = threading.Thread(target=self._renew, name="broker-session-renewal", daemon=True)
                    self._renewer.start()

    # -- renewal (its own thread) ---------------------------------------------------------
    def _renew(self) -> None:
        delay = 0.05
        while not self._closed.is_set():
            with self._lock:
                losses = self.losses
            try:
                self.broker_epoch = self.metadata.register_broker(self.registration)
                cluster_id = self.metadata.ensure_cluster_id()
            except BrokerIdInUseError as exc:
                log.error("broker %d: cannot register again: %s", self.broker_id, exc)
                break
            except StoreError as exc:
                log.warning("broker %d: registering again failed (%s); retrying", self.broker_id, exc)
                self._closed.wait(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            if self.cluster_id is not None and cluster_id != self.cluster_id:
                log.error("broker %d: the cluster id changed from %s to %s while the session was lost",
                          self.broker_id, self.cluster_id, cluster_id)
            with self._lock:
                if self.losses == losses:  # else registered under a session that is gone too: once more
                    self._renewer = None
                    log.info("broker %d registered again under a new session", self.broker_id)
                    if self.on_registered is not None:
                        self.on_registered()
                    return
        with self._lock:
            self._renewer = None
