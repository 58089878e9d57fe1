"""A broker's controlled shutdown: it asks the controller to move its leaderships before it stops.

Kafka's ``KafkaServer.controlledShutdown``. With ``controlled.shutdown.enable``
(the default), :meth:`Broker.stop` first sends ControlledShutdown (v3) for this
broker to the controller the metadata cache names (to its own controller
directly when it is the controller) and waits for the answer (at most
``REQUEST_TIMEOUT_MS`` either way): the controller
has moved every leadership it could to other in-sync replicas, taken this
broker out of the ISRs and stopped its replicas, so producers and consumers
already talk to the new leaders when the listeners close.

Up to ``controlled.shutdown.max.retries`` attempts. An attempt fails when the
controller cannot be reached, is not the controller any more, or answers
with partitions remaining; the next waits up to
``controlled.shutdown.retry.backoff.ms``, and less when the metadata cache
names a new controller meanwhile (a controller that stopped a moment ago is
replaced in well under the backoff). After the last attempt the broker stops
anyway (an unclean handover: the controller learns it from the lost
registration), as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.client._connection import BrokerConnection
from broker.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker")

VERSION = 3
REQUEST_TIMEOUT_MS = 30000  # Kafka's controller.socket.timeout.ms


async def controlled_shutdown(broker: "Broker") -> bool:
    """Ask the controller until it moved everything; True if it did (see the module docstring)."""
    config, cache = broker.config, broker.metadata_cache
    attempts = config.controlled_shutdown_max_retries
    for attempt in range(1, attempts + 1):
        controller_id = cache.controller_id
        try:
            error, remaining = await _ask(broker, controller_id)
        except Exception as exc:  # noqa: BLE001 - refused, lost, timed out: try again, then stop anyway
            why = f"controller {controller_id} unreachable ({exc})"
        else:
            if error == ErrorCode.NONE and not remaining:
                log.info("broker %d: controlled shutdown succeeded", broker.broker_id)
                return True
            why = (f"controller {controller_id} answered {ErrorCode(error).name}" if error != ErrorCode.NONE else
                   "partitions remaining: " + ", ".join(f"{t}-{p}" for t, p in remaining))
        log.warning("broker %d: controlled shutdown attempt %d of %d failed: %s", broker.broker_id, attempt,
                    attempts, why)
        if attempt < attempts:
            await cache.wait_until(lambda: cache.controller_id not in (controller_id, -1),
                                   config.controlled_shutdown_retry_backoff_ms / 1000)
    log.warning("broker %d: proceeding with an unclean shutdown", broker.broker_id)
    return False


async def _ask(broker: "Broker", controller_id: int) -> tuple[int, list[tuple[str, int]]]:
    if controller_id == broker.broker_id:
        if not broker.controller.is_active:
            return ErrorCode.NOT_CONTROLLER, []
        # bounded as a request to another broker is: a controller busy that long counts as a failed attempt
        async with asyncio.timeout(REQUEST_TIMEOUT_MS / 1000):
            return await broker.controller.controlled_shutdown(broker.broker_id, broker.broker_epoch)
    info = broker.metadata_cache.broker(controller_id)
    endpoint = None if info is None else info.listener(broker.config.inter_broker_listener)
    if endpoint is None:
        raise ConnectionError(f"not among the live brokers on listener {broker.config.inter_broker_listener}")
    conn = BrokerConnection(endpoint.host, endpoint.port, node_id=controller_id,
                            client_id=f"broker-{broker.broker_id}", request_timeout_ms=REQUEST_TIMEOUT_MS,
                            ssl_context=broker.tls.inter_broker, sasl=broker.inter_broker_sasl)
    await conn.connect()
    try:
        response = await conn.request(ApiKey.CONTROLLED_SHUTDOWN, {"broker_id": broker.broker_id,
                                                                    "broker_epoch": broker.broker_epoch},
                                      version=VERSION)
    finally:
        conn.close()
    return response["error_code"], [(r["topic_name"], r["partition_index"]) for r in response["remaining_partitions"]]
