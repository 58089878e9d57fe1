"""The controller's requests to the brokers: one connection and one ordered queue per broker.

Kafka's ``ControllerChannelManager``. The controller queues LeaderAndIsr,
UpdateMetadata and StopReplica requests with :meth:`ControllerChannel.send`,
which returns at once with a future of the response body. Per broker, requests
go out one at a time in the order they were queued (a broker must see a
LeaderAndIsr before the UpdateMetadata that announces it), each awaited before
the next. A connection that fails is made again with a backoff (0.1 s
doubling to 1 s) and the request at the head is sent again, until the broker
is removed (:meth:`remove_broker`, when its registration goes), which
answers its pending futures with None.

Requests to the controller's own broker skip the socket: the request is
encoded and decoded by the protocol codec (so the handler sees exactly the
dict the network would give it) and the handler registered for its key is
called directly.

Loop-only (not thread-safe).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import TYPE_CHECKING

from broker.acl import RefusalWarning
from broker.protocol import ApiKey, ErrorCode, decode_request, encode_request
from broker.server.broker_link import BrokerLink
from broker.server.context import RequestContext

if TYPE_CHECKING:
    from broker.cluster.znodes import BrokerRegistration
    from broker.server.broker import Broker

log = logging.getLogger("broker.controller")

#: The highest versions the controller sends; a broker that has only lower ones (an older release during a
#: rolling upgrade) gets its highest (:class:`_BrokerQueue`, through
#: :class:`BrokerLink`), without the topic ids of LeaderAndIsr v5 and
#: UpdateMetadata v7 (KIP-516).
LEADER_AND_ISR_VERSION, UPDATE_METADATA_VERSION, STOP_REPLICA_VERSION = 5, 7, 3
BACKOFF_S = (0.1, 1.0)  # first and longest pause between connection attempts
REQUEST_TIMEOUT_MS = 30000
_correlation = itertools.count(1)


class _BrokerQueue:
    """The requests for one broker and the task that sends them in order."""

    def __init__(self, channel: "ControllerChannel", registration: "BrokerRegistration") -> None:
        self.channel = channel
        self.registration = registration
        self.queue: asyncio.Queue = asyncio.Queue()
        inter = channel.broker.config.inter_broker_listener
        self.link = BrokerLink(registration.broker_id, lambda: registration.listener(inter),
                               client_id=f"controller-{channel.broker.broker_id}",
                               request_timeout_ms=REQUEST_TIMEOUT_MS, ssl_context=lambda: channel.broker.tls.inter_broker,
                               sasl=channel.broker.inter_broker_sasl)
        self._refusals = RefusalWarning(log)
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        broker = self.channel.broker
        local = self.registration.broker_id == broker.broker_id
        while True:
            api_key, version, body, future = await self.queue.get()
            delay = BACKOFF_S[0]
            while not future.done():
                try:
                    response = await (self._call_local(api_key, version, body) if local
                                      else self.link.request(api_key, body, version))
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # connection refused, lost or timed out: the broker may come back
                    log.info("controller: request %d to broker %d failed (%s); retrying in %.1f s", api_key,
                             self.registration.broker_id, exc, delay)
                    self.link.disconnect()
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, BACKOFF_S[1])
                    continue
                if api_key == ApiKey.LEADER_AND_ISR and isinstance(response, dict):
                    response = partition_errors_by_name(body, response)
                if isinstance(response, dict) and response.get("error_code") == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
                    self._refusals.refused(f"controller: request {api_key} to broker {self.registration.broker_id}")
                if not future.done():
                    future.set_result(response)

    async def _call_local(self, api_key: int, version: int, body: dict) -> dict | None:
        broker = self.channel.broker
        frame = encode_request(api_key, version, next(_correlation) & 0x7FFFFFFF, "controller", body)
        header, decoded = decode_request(frame[4:])
        handler = broker.registry.get(api_key)
        if handler is None:
            raise RuntimeError(f"this broker serves no api key {api_key}")
        return await handler.handler(RequestContext(broker, header, "controller"), decoded)

    def close(self) -> None:
        self.task.cancel()
        self.link.disconnect()
        while not self.queue.empty():
            _key, _version, _body, future = self.queue.get_nowait()
            if not future.done():
                future.set_result(None)


def partition_errors_by_name(request: dict, response: dict) -> dict:
    """A LeaderAndIsr response with its errors as one list naming topics (``partition_errors``), whatever
    the version: v5 groups them under ``topics`` by topic id, which the request's topic states name."""
    if response.get("partition_errors") or not response.get("topics"):
        return response
    names = {t.get("topic_id"): t["topic_name"] for t in request.get("topic_states", ())}
    flat = [dict(e, topic_name=names.get(t["topic_id"], "")) for t in response["topics"]
            for e in t["partition_errors"]]
    return {**response, "partition_errors": flat}


class ControllerChannel:
    """See the module docstring."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self._queues: dict[int, _BrokerQueue] = {}

    def add_broker(self, registration: "BrokerRegistration") -> None:
        """Start a queue for a broker that registered (again: its old queue and connection go)."""
        self.remove_broker(registration.broker_id)
        self._queues[registration.broker_id] = _BrokerQueue(self, registration)

    def remove_broker(self, broker_id: int) -> None:
        queue = self._queues.pop(broker_id, None)
        if queue is not None:
            queue.close()

    def send(self, broker_id: int, api_key: int, version: int, body: dict) -> asyncio.Future:
        """Queue a request for ``broker_id``; the future gets the response body, or None if it never went.

        The body's ``broker_epoch`` becomes the epoch of the registration the queue was made for
        (KIP-380: a broker registered again since refuses the request as STALE_BROKER_EPOCH).
        """
        future = asyncio.get_running_loop().create_future()
        queue = self._queues.get(broker_id)
        if queue is None:
            future.set_result(None)
        else:
            if "broker_epoch" in body:
                body = {**body, "broker_epoch": queue.registration.broker_epoch}
            queue.queue.put_nowait((int(api_key), version, body, future))
        return future

    def close(self) -> None:
        for broker_id in list(self._queues):
            self.remove_broker(broker_id)
