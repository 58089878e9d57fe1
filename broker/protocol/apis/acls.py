"""ACL APIs: DescribeAcls (29), CreateAcls (30), DeleteAcls (31), versions 0-2 (flexible from v2),
Kafka 2.7's ranges.

Schemas in the compact form of :mod:`broker.protocol.schema`; field facts follow Apache
Kafka's message definitions. v1 adds the resource pattern type (LITERAL 3, PREFIXED 4; a
filter may also say ANY 1 or MATCH 2), whose default for v0 is LITERAL.
"""

from ..schema import Api, f

LITERAL = 3


def _filter() -> list:
    """The fields of an ACL binding filter (DescribeAcls's request, each of DeleteAcls's filters)."""
    return [
        f("resource_type_filter", "int8"),
        f("resource_name_filter", "string", nullable="0+"),
        f("pattern_type_filter", "int8", "1+", default=LITERAL),
        f("principal_filter", "string", nullable="0+"),
        f("host_filter", "string", nullable="0+"),
        f("operation", "int8"),
        f("permission_type", "int8"),
    ]


DESCRIBE_ACLS = Api(
    key=29, name="DescribeAcls", versions="0-2", flexible="2+",
    request=_filter(),
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+"),
        f("resources", "[]", fields=[
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("pattern_type", "int8", "1+", default=LITERAL),
            f("acls", "[]", fields=[
                f("principal", "string"),
                f("host", "string"),
                f("operation", "int8"),
                f("permission_type", "int8"),
            ]),
        ]),
    ],
)

CREATE_ACLS = Api(
    key=30, name="CreateAcls", versions="0-2", flexible="2+",
    request=[
        f("creations", "[]", fields=[
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("resource_pattern_type", "int8", "1+", default=LITERAL),
            f("principal", "string"),
            f("host", "string"),
            f("operation", "int8"),
            f("permission_type", "int8"),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("results", "[]", fields=[
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+"),
        ]),
    ],
)

DELETE_ACLS = Api(
    key=31, name="DeleteAcls", versions="0-2", flexible="2+",
    request=[
        f("filters", "[]", fields=_filter()),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("filter_results", "[]", fields=[
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+"),
            f("matching_acls", "[]", fields=[
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+"),
                f("resource_type", "int8"),
                f("resource_name", "string"),
                f("pattern_type", "int8", "1+", default=LITERAL),
                f("principal", "string"),
                f("host", "string"),
                f("operation", "int8"),
                f("permission_type", "int8"),
            ]),
        ]),
    ],
)

APIS = (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS)
