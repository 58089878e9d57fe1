"""What a request handler gets besides the request body.

A handler (see :mod:`broker.server.registry`) is called as
``await handler(ctx, request)``. Through ``ctx.broker`` it reaches every piece
of broker state, each with one owner:

* ``ctx.broker.config``       :class:`broker.config.BrokerConfig` (read-only)
* ``ctx.broker.metadata``     :class:`broker.cluster.ClusterMetadata` (blocking: call via ``ctx.broker.run_blocking``)
* ``ctx.broker.topics``       :class:`broker.server.topics.TopicManager` (topics and their partitions' metadata)
* ``ctx.broker.metadata_cache`` :class:`broker.server.metadata_cache.MetadataCache` (live brokers, leaders, ISR,
  the controller id: what the controller last told this broker)
* ``ctx.broker.replicas``     :class:`broker.replica.ReplicaManager` (the partitions held here: appends, reads,
  high watermarks, the purgatory); handlers never touch a log
* ``ctx.broker.log_manager``  :class:`broker.log.LogManager` (log dirs as a whole)
* ``ctx.broker.metrics``      :class:`broker.metrics.BrokerMetrics`
* ``ctx.broker.cluster_id``, ``ctx.broker.broker_id``, ``ctx.broker.endpoints`` (advertised)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from broker.protocol import RequestHeader
    from broker.acl import AclOperation, ResourceType
    from broker.server.broker import Broker
    from broker.server.network import Connection


@dataclass(slots=True)
class RequestContext:
    """One request: its header, the connection it came on, and the broker."""

    broker: "Broker"
    header: "RequestHeader"
    peer: str
    #: Times (``loop.time()``) the request was decoded, its handler started and
    #: its response was ready, for the request metrics (counted after the response is written).
    received_at: float = 0.0
    started_at: float = 0.0
    answered_at: float = 0.0
    #: What a Produce appended, ``[(topic, valid bytes, records), ...]``, counted with the request.
    produced: list | None = None
    #: Set by the network layer; see :meth:`appends_queued`.
    on_appends_queued: Callable[[], None] | None = None
    #: The listener the request came in on (its name in ``listeners``): endpoints are answered for it.
    listener: str = "PLAINTEXT"
    #: The :class:`~broker.server.network.Connection` it came on (None for requests made inside the broker):
    #: its ``sasl`` session and ``principal`` (``User:ANONYMOUS`` until a SASL exchange names the client).
    connection: "Connection | None" = None
    #: Client quotas (:mod:`broker.server.quotas`), kept only while any quota is configured: the request's
    #: size, the loop time its handler has taken so far (ns) and when its current step began
    #: (``time.perf_counter_ns()``, 0 when not measured).
    request_bytes: int = 0
    loop_ns: int = 0
    step_ns: int = 0
    #: Record bytes a consumer Fetch answers with (set by the Fetch handler)
    response_bytes: int = 0
    #: Record bytes per topic a consumer Fetch answers with, while quotas may still empty the answer
    fetched: dict | None = None
    #: The throttle of the client's producer_byte_rate, counted as the Produce arrived
    produce_throttle_ms: int = 0
    #: The throttle of a controller mutation quota (KIP-599), set by the topic creation and deletion handlers
    mutation_throttle_ms: int = 0
    #: A Fetch answered from an incremental fetch session: puts the session back as it was, when client quotas
    #: empty the answer (:mod:`broker.server.fetch_sessions`); called with the response
    fetch_undo: Callable[[dict], None] | None = None

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    def authorize(self, operation: "AclOperation", resource_type: "ResourceType", name: str) -> bool:
        """Whether this request's principal may do ``operation`` on the resource (:mod:`broker.acl`).

        True without an authorizer (``authorizer.class.name`` empty) and for
        requests the broker makes itself (no connection). For the cluster
        resource pass ``broker.acl.CLUSTER_NAME``.
        """
        authorizer = self.broker.authorizer
        if authorizer is None or self.connection is None:
            return True
        conn = self.connection
        return authorizer.authorize(conn.principal, conn.host, operation, resource_type, name)

    def authorized(self, operation: "AclOperation", resource_type: "ResourceType", names) -> set[str]:
        """The names among ``names`` this request's principal may do ``operation`` on (all without an authorizer)."""
        if self.broker.authorizer is None or self.connection is None:
            return set(names)
        return {name for name in names if self.authorize(operation, resource_type, name)}

    def appends_queued(self) -> None:
        """Say that every append of this (Produce) request is queued on its log dir's writer.

        From then on a later Produce on the same connection may start: its
        appends queue behind these, so the order of effects holds (see
        :mod:`broker.server.network`). Every other request still waits for
        this one to finish.
        """
        hook, self.on_appends_queued = self.on_appends_queued, None
        if hook is not None:
            hook()


class CloseConnection(Exception):
    """Raised by a handler to close its connection without a response (logged once).

    Kafka does this for an acks=0 produce that failed, since there is no
    response in which to report the error.
    """
