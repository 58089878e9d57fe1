"""Producer id API: InitProducerId (22).

Schemas in the compact form of :mod:`broker.protocol.schema`; field facts follow Apache
Kafka's message definitions (3.8).
"""

from ..schema import Api, f

INIT_PRODUCER_ID = Api(
    key=22, name="InitProducerId", versions="0-5", flexible="2+",
    request=[
        f("transactional_id", "string", nullable="0+"),
        f("transaction_timeout_ms", "int32"),
        f("producer_id", "int64", "3+", default=-1),
        f("producer_epoch", "int16", "3+", default=-1),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("producer_id", "int64", default=-1),
        f("producer_epoch", "int16"),
    ],
)

APIS = (INIT_PRODUCER_ID,)
