"""A connection this broker opens to another broker for requests of its own.

The controller (LeaderAndIsr, UpdateMetadata, StopReplica) and the transaction
coordinator (WriteTxnMarkers) each keep one :class:`BrokerLink` per destination
broker. The link connects on the first request and again after it was dropped;
whoever sees a request fail calls :meth:`BrokerLink.disconnect`, so the next
request starts on a fresh connection (the peer may have restarted or moved).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import ssl

from broker.client._connection import BrokerConnection


class BrokerLink:
    """A lazily opened connection to broker ``broker_id`` at the endpoint ``endpoint()`` names.

    ``endpoint()`` is asked at every (re)connect and returns an object with
    ``host`` and ``port``, or None when the broker is not known to be alive
    (the request then raises ``ConnectionError``).
    """

    def __init__(self, broker_id: int, endpoint: Callable[[], Any], *, client_id: str, request_timeout_ms: int,
                 connect_timeout_ms: int = 10000,
                 ssl_context: "Callable[[], ssl.SSLContext | None]" = lambda: None, sasl: Any = None) -> None:
        self.broker_id = broker_id
        # TLS when the inter-broker listener is SSL or SASL_SSL (broker.tls): asked at every (re)connect, so a
        # replaced key store serves the next connection
        self._ssl_context = ssl_context
        self._sasl = sasl  # SaslSettings when it is SASL_PLAINTEXT or SASL_SSL (Broker.inter_broker_sasl)
        self._endpoint = endpoint
        self._client_id = client_id
        self._request_timeout_ms = request_timeout_ms
        self._connect_timeout_ms = connect_timeout_ms
        self.connection: BrokerConnection | None = None

    async def request(self, api_key: int, body: dict, version: int | None = None) -> dict:
        """Send one request and return the decoded response; ``version`` None = the highest both sides have.

        A ``version`` the peer does not have (an older release during a rolling upgrade) is lowered to the
        highest it has: fields the lower version lacks are not sent."""
        if self.connection is None or self.connection.closed:
            endpoint = self._endpoint()
            if endpoint is None:
                raise ConnectionError(f"broker {self.broker_id} is not alive")
            conn = BrokerConnection(endpoint.host, endpoint.port, node_id=self.broker_id, client_id=self._client_id,
                                    request_timeout_ms=self._request_timeout_ms,
                                    connect_timeout_ms=self._connect_timeout_ms, ssl_context=self._ssl_context(),
                                    sasl=self._sasl)
            await conn.connect()
            self.connection = conn
        conn = self.connection
        if version is None:
            version = conn.version(api_key)
        else:  # the peer's own range (the client's table knows no broker-to-broker APIs)
            version = min(version, conn.broker_versions.get(api_key, (0, version))[1])
        return await conn.request(api_key, body, version=version)

    def disconnect(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None
