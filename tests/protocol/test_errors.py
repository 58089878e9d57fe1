"""ErrorCode names and numbers spot-checked against Apache Kafka's, and retriability."""

from broker.protocol import ErrorCode, InvalidRequestError, ProtocolError, UnsupportedVersionError


def test_codes_match_kafka():
    expected = {
        "UNKNOWN_SERVER_ERROR": -1, "NONE": 0, "OFFSET_OUT_OF_RANGE": 1, "CORRUPT_MESSAGE": 2,
        "UNKNOWN_TOPIC_OR_PARTITION": 3, "INVALID_FETCH_SIZE": 4, "LEADER_NOT_AVAILABLE": 5,
        "NOT_LEADER_OR_FOLLOWER": 6, "REQUEST_TIMED_OUT": 7, "MESSAGE_TOO_LARGE": 10,
        "COORDINATOR_NOT_AVAILABLE": 15, "NOT_COORDINATOR": 16, "INVALID_TOPIC_EXCEPTION": 17,
        "RECORD_LIST_TOO_LARGE": 18, "NOT_ENOUGH_REPLICAS": 19, "INVALID_REQUIRED_ACKS": 21,
        "ILLEGAL_GENERATION": 22, "UNKNOWN_MEMBER_ID": 25, "REBALANCE_IN_PROGRESS": 27,
        "TOPIC_AUTHORIZATION_FAILED": 29, "UNSUPPORTED_SASL_MECHANISM": 33,
        "UNSUPPORTED_VERSION": 35, "TOPIC_ALREADY_EXISTS": 36, "INVALID_PARTITIONS": 37,
        "INVALID_REPLICATION_FACTOR": 38, "INVALID_CONFIG": 40, "NOT_CONTROLLER": 41,
        "INVALID_REQUEST": 42, "POLICY_VIOLATION": 44, "KAFKA_STORAGE_ERROR": 56,
        "FENCED_LEADER_EPOCH": 74, "UNKNOWN_LEADER_EPOCH": 75, "MEMBER_ID_REQUIRED": 79,
        "GROUP_SUBSCRIBED_TO_TOPIC": 86, "INVALID_RECORD": 87, "UNSTABLE_OFFSET_COMMIT": 88,
        "THROTTLING_QUOTA_EXCEEDED": 89, "PRODUCER_FENCED": 90,
    }
    for name, code in expected.items():
        assert ErrorCode[name] == code, name
    assert len(ErrorCode) >= 92
    assert [int(c) for c in ErrorCode] == sorted(int(c) for c in ErrorCode)


def test_retriable():
    for name in ("CORRUPT_MESSAGE", "UNKNOWN_TOPIC_OR_PARTITION", "NOT_LEADER_OR_FOLLOWER",
                 "LEADER_NOT_AVAILABLE", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS",
                 "COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR", "KAFKA_STORAGE_ERROR"):
        assert ErrorCode[name].retriable, name
    for name in ("NONE", "OFFSET_OUT_OF_RANGE", "MESSAGE_TOO_LARGE", "INVALID_REQUEST",
                 "UNSUPPORTED_VERSION", "TOPIC_ALREADY_EXISTS", "INVALID_RECORD"):
        assert not ErrorCode[name].retriable, name


def test_exceptions_carry_codes():
    assert UnsupportedVersionError("x").error_code == ErrorCode.UNSUPPORTED_VERSION
    assert InvalidRequestError("x").error_code == ErrorCode.INVALID_REQUEST
    assert issubclass(InvalidRequestError, ProtocolError)
