"""Delegation token APIs (KIP-48): CreateDelegationToken (38), RenewDelegationToken (39),
ExpireDelegationToken (40), DescribeDelegationToken (41), versions 0-2 as Kafka 2.7 serves them (v1 is
v0 with the throttle answered before it is applied, KIP-219; v2 is v1 made flexible).

Schemas in the compact form of :mod:`broker.protocol.schema`; field facts follow Apache
Kafka's message definitions. The semantics are in :mod:`broker.tokens`.
"""

from ..schema import Api, f


def _principal() -> list:
    return [f("principal_type", "string"), f("principal_name", "string")]


CREATE_DELEGATION_TOKEN = Api(
    key=38, name="CreateDelegationToken", versions="0-2", flexible="2+",
    request=[
        f("renewers", "[]", fields=_principal()),
        f("max_lifetime_ms", "int64", default=-1),  # -1: the broker's delegation.token.max.lifetime.ms
    ],
    response=[
        f("error_code", "int16"),
        *_principal(),  # the owner
        f("issue_timestamp_ms", "int64"),
        f("expiry_timestamp_ms", "int64"),
        f("max_timestamp_ms", "int64"),
        f("token_id", "string"),
        f("hmac", "bytes"),
        f("throttle_time_ms", "int32"),
    ],
)

RENEW_DELEGATION_TOKEN = Api(
    key=39, name="RenewDelegationToken", versions="0-2", flexible="2+",
    request=[
        f("hmac", "bytes"),
        f("renew_period_ms", "int64", default=-1),  # -1: the broker's delegation.token.expiry.time.ms
    ],
    response=[
        f("error_code", "int16"),
        f("expiry_timestamp_ms", "int64"),
        f("throttle_time_ms", "int32"),
    ],
)

EXPIRE_DELEGATION_TOKEN = Api(
    key=40, name="ExpireDelegationToken", versions="0-2", flexible="2+",
    request=[
        f("hmac", "bytes"),
        f("expiry_time_period_ms", "int64", default=-1),  # negative: expire now
    ],
    response=[
        f("error_code", "int16"),
        f("expiry_timestamp_ms", "int64"),
        f("throttle_time_ms", "int32"),
    ],
)

DESCRIBE_DELEGATION_TOKEN = Api(
    key=41, name="DescribeDelegationToken", versions="0-2", flexible="2+",
    request=[
        f("owners", "[]", nullable="0+", fields=_principal()),  # null: every token the requester may see
    ],
    response=[
        f("error_code", "int16"),
        f("tokens", "[]", fields=[
            *_principal(),  # the owner
            f("issue_timestamp", "int64"),
            f("expiry_timestamp", "int64"),
            f("max_timestamp", "int64"),
            f("token_id", "string"),
            f("hmac", "bytes"),
            f("renewers", "[]", fields=_principal()),
        ]),
        f("throttle_time_ms", "int32"),
    ],
)

APIS = (CREATE_DELEGATION_TOKEN, RENEW_DELEGATION_TOKEN, EXPIRE_DELEGATION_TOKEN, DESCRIBE_DELEGATION_TOKEN)
