"""Client telemetry APIs (KIP-714): GetTelemetrySubscriptions (71), PushTelemetry (72), and ListConfigResources
(74, named ListClientMetricsResources in Kafka 3.7-4.0), at Kafka 4.2's versions. Every version is flexible and
none has a nullable or tagged field.

Schemas in the compact form of :mod:`broker.protocol.schema`; field facts follow Apache Kafka's message
definitions. The semantics are in :mod:`broker.server.client_metrics`.
"""

from ..schema import Api, f

GET_TELEMETRY_SUBSCRIPTIONS = Api(
    key=71, name="GetTelemetrySubscriptions", versions="0", flexible="0+",
    request=[
        f("client_instance_id", "uuid"),  # zero on a client's first request: the broker makes one
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("client_instance_id", "uuid"),
        f("subscription_id", "int32"),
        f("accepted_compression_types", "[]int8"),  # in the broker's order of preference
        f("push_interval_ms", "int32"),
        f("telemetry_max_bytes", "int32"),
        f("delta_temporality", "bool"),
        f("requested_metrics", "[]string"),  # name prefixes; [] none, ["*"] all
    ],
)

PUSH_TELEMETRY = Api(
    key=72, name="PushTelemetry", versions="0", flexible="0+",
    request=[
        f("client_instance_id", "uuid"),
        f("subscription_id", "int32"),
        f("terminating", "bool"),
        f("compression_type", "int8"),
        f("metrics", "bytes"),  # an OTLP MetricsData, compressed unless compression_type is 0
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
    ],
)

LIST_CONFIG_RESOURCES = Api(
    key=74, name="ListConfigResources", versions="0-1", flexible="0+",
    request=[
        f("resource_types", "[]int8", "1+"),  # empty: every type this version knows
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("config_resources", "[]", fields=[
            f("resource_name", "string"),
            f("resource_type", "int8", "1+", default=16),
        ]),
    ],
)

APIS = (GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY, LIST_CONFIG_RESOURCES)
