"""Exceptions raised by :mod:`broker.client`.

Every exception the client raises derives from :class:`KafkaError`. Errors a
broker answered with carry Kafka's numeric ``error_code`` and its name
(``error_name``, e.g. ``"UNKNOWN_TOPIC_OR_PARTITION"``); errors about our own
misuse are kept apart from errors the peer caused::

    KafkaError                          base of everything below
    ├── ConfigError (ValueError)        bad configuration or argument: our misuse
    ├── IllegalStateError               call not valid now (closed client, not subscribed, ...)
    ├── KafkaConnectionError            broker unreachable / connection lost (retriable)
    ├── KafkaTimeoutError               an operation ran out of time (REQUEST_TIMED_OUT, 7)
    ├── ProtocolError                   the peer sent bytes we cannot decode
    │   └── UnsupportedApiError         the broker serves no version of an API we need (35)
    ├── NoOffsetForPartitionError       no committed offset and auto_offset_reset="none"
    ├── ZooKeeperError                  the legacy ZooKeeper (``zookeeper_connect``) cannot be
    │                                   reached or refused an operation
    └── BrokerResponseError             the broker answered with a non-zero error code
        ├── RetriableError              ... a code Kafka marks retriable
        │   ├── NotLeaderOrFollowerError        (6)
        │   ├── UnknownTopicOrPartitionError    (3)
        │   └── CoordinatorNotAvailableError / NotCoordinatorError (15 / 16)
        ├── OffsetOutOfRangeError       (1)
        ├── TopicAlreadyExistsError     (36)
        ├── GroupError                  (ILLEGAL_GENERATION 22, UNKNOWN_MEMBER_ID 25,
        │                                REBALANCE_IN_PROGRESS 27, ...): membership lost
        ├── ProducerFencedError         (PRODUCER_FENCED 90, INVALID_PRODUCER_EPOCH 47): a newer
        │                                producer with the same transactional id took over
        ├── AuthenticationError         SASL refused (SASL_AUTHENTICATION_FAILED 58, ILLEGAL_SASL_STATE
        │   │                            34, a SCRAM answer that does not verify): never retried
        │   └── UnsupportedSaslMechanismError  (33): ``mechanisms`` the broker offers
        └── ...                         any other code: BrokerResponseError itself

:func:`error_for_code` maps a code to the most specific class. ``str(err)`` is
``"NAME (code): message"``, so a CLI can print it on one line.
"""

from __future__ import annotations

from typing import Any


class KafkaError(Exception):
    """Base of every client error. ``error_code`` is Kafka's code (-1 when none applies)."""

    error_code: int = -1
    retriable: bool = False

    @property
    def error_name(self) -> str:
        return _code_name(self.error_code)


class ConfigError(KafkaError, ValueError):
    """A configuration value or argument is invalid (our misuse, never the broker's)."""


class IllegalStateError(KafkaError):
    """The call is not valid in the client's current state (e.g. after close())."""


class KafkaConnectionError(KafkaError):
    """Could not connect to a broker, or the connection broke while a request was in flight."""

    retriable = True
    error_code = -1


class KafkaTimeoutError(KafkaError):
    """An operation did not finish within its timeout (maps to REQUEST_TIMED_OUT, 7)."""

    error_code = 7
    retriable = True


class ZooKeeperError(KafkaError):
    """The ZooKeeper holding legacy consumer groups cannot be reached, lost our session, or
    refused an operation (see :mod:`broker.client._zookeeper`)."""

    retriable = True


class ProtocolError(KafkaError):
    """The peer sent a frame we cannot decode or that does not match our request."""

    error_code = 2  # CORRUPT_MESSAGE is the nearest Kafka code


class UnsupportedApiError(ProtocolError):
    """The broker supports no version of this API that we support (UNSUPPORTED_VERSION, 35)."""

    error_code = 35


class NoOffsetForPartitionError(KafkaError):
    """A partition has no committed offset (or its offset is out of range) and
    ``auto_offset_reset`` is ``"none"``. ``partitions`` lists the TopicPartitions."""

    error_code = 1  # OFFSET_OUT_OF_RANGE

    def __init__(self, partitions: Any) -> None:
        self.partitions = list(partitions)
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in self.partitions)
        super().__init__(
            f"no committed offset or offset out of range for {names}, and auto_offset_reset is 'none'"
        )


class BrokerResponseError(KafkaError):
    """The broker answered with a non-zero Kafka error code."""

    def __init__(self, error_code: int, message: str | None = None, *, context: str = "") -> None:
        self.error_code = int(error_code)
        self.error_message = message
        self.context = context
        self.retriable = _code_retriable(self.error_code)
        text = f"{_code_name(self.error_code)} ({self.error_code})"
        if context:
            text += f" in {context}"
        if message:
            text += f": {message}"
        super().__init__(text)


class ProducerFencedError(BrokerResponseError):
    """PRODUCER_FENCED (90) / INVALID_PRODUCER_EPOCH (47): fatal for a transactional producer; close it."""


class AuthenticationError(BrokerResponseError):
    """SASL authentication failed (see :mod:`broker.client._sasl`): ``error_message`` is the broker's
    reason (wrong password, unknown user) or ours. Not retriable: the same credentials fail again."""

    def __init__(self, error_code: int, message: str | None = None, *, context: str = "") -> None:
        super().__init__(error_code, message, context=context)
        self.retriable = False


class UnsupportedSaslMechanismError(AuthenticationError):
    """UNSUPPORTED_SASL_MECHANISM (33): the broker does not enable ``sasl.mechanism``;
    ``mechanisms`` lists those it does."""

    def __init__(self, error_code: int = 33, message: str | None = None, *, context: str = "",
                 mechanisms: list[str] | None = None) -> None:
        super().__init__(error_code, message, context=context)
        self.mechanisms = list(mechanisms or [])


class RetriableError(BrokerResponseError):
    """A broker error Kafka marks retriable; the client retries these itself first."""


class NotLeaderOrFollowerError(RetriableError):
    """NOT_LEADER_OR_FOLLOWER (6): metadata is stale; refresh and retry."""


class UnknownTopicOrPartitionError(RetriableError):
    """UNKNOWN_TOPIC_OR_PARTITION (3)."""


class CoordinatorNotAvailableError(RetriableError):
    """COORDINATOR_NOT_AVAILABLE (15) or COORDINATOR_LOAD_IN_PROGRESS (14)."""


class NotCoordinatorError(RetriableError):
    """NOT_COORDINATOR (16): find the coordinator again."""


class OffsetOutOfRangeError(BrokerResponseError):
    """OFFSET_OUT_OF_RANGE (1)."""


class TopicAlreadyExistsError(BrokerResponseError):
    """TOPIC_ALREADY_EXISTS (36)."""


class GroupError(BrokerResponseError):
    """The consumer's group membership is no longer valid (generation or member id)."""


# Codes the client must know by number; names and retriability of all others
# come from broker.protocol.ErrorCode when it is importable.
NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
TOPIC_ALREADY_EXISTS = 36
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
INVALID_PRODUCER_EPOCH = 47
PRODUCER_FENCED = 90
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

_FALLBACK_NAMES = {
    -1: "UNKNOWN_SERVER_ERROR", 0: "NONE", 1: "OFFSET_OUT_OF_RANGE", 2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION", 5: "LEADER_NOT_AVAILABLE", 6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT", 14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR", 22: "ILLEGAL_GENERATION", 25: "UNKNOWN_MEMBER_ID",
    27: "REBALANCE_IN_PROGRESS", 36: "TOPIC_ALREADY_EXISTS", 74: "FENCED_LEADER_EPOCH",
    75: "UNKNOWN_LEADER_EPOCH", 79: "MEMBER_ID_REQUIRED",
}
_FALLBACK_RETRIABLE = {2, 3, 5, 6, 7, 13, 14, 15, 16, 19, 20, 74, 75}


def _error_code_enum(code: int):
    try:
        from broker.protocol import ErrorCode  # noqa: PLC0415 - optional until the codec exists
    except Exception:  # pragma: no cover - only while broker.protocol is absent
        return None
    try:
        return ErrorCode(code)
    except ValueError:
        return None


def _code_name(code: int) -> str:
    member = _error_code_enum(code)
    if member is not None:
        return member.name
    return _FALLBACK_NAMES.get(code, f"ERROR_{code}")


def _code_retriable(code: int) -> bool:
    member = _error_code_enum(code)
    if member is not None and hasattr(member, "retriable"):
        return bool(member.retriable)
    return code in _FALLBACK_RETRIABLE


_SPECIFIC: dict[int, type[BrokerResponseError]] = {
    OFFSET_OUT_OF_RANGE: OffsetOutOfRangeError,
    UNKNOWN_TOPIC_OR_PARTITION: UnknownTopicOrPartitionError,
    NOT_LEADER_OR_FOLLOWER: NotLeaderOrFollowerError,
    LEADER_NOT_AVAILABLE: NotLeaderOrFollowerError,
    COORDINATOR_LOAD_IN_PROGRESS: CoordinatorNotAvailableError,
    COORDINATOR_NOT_AVAILABLE: CoordinatorNotAvailableError,
    NOT_COORDINATOR: NotCoordinatorError,
    TOPIC_ALREADY_EXISTS: TopicAlreadyExistsError,
    ILLEGAL_GENERATION: GroupError,
    UNKNOWN_MEMBER_ID: GroupError,
    REBALANCE_IN_PROGRESS: GroupError,
    FENCED_INSTANCE_ID: GroupError,
    INVALID_PRODUCER_EPOCH: ProducerFencedError,
    PRODUCER_FENCED: ProducerFencedError,
    UNSUPPORTED_SASL_MECHANISM: UnsupportedSaslMechanismError,
    ILLEGAL_SASL_STATE: AuthenticationError,
    SASL_AUTHENTICATION_FAILED: AuthenticationError,
}


def error_for_code(error_code: int, message: str | None = None, *, context: str = "") -> BrokerResponseError:
    """The most specific :class:`BrokerResponseError` for a Kafka error code."""
    cls = _SPECIFIC.get(error_code)
    if cls is None:
        cls = RetriableError if _code_retriable(error_code) else BrokerResponseError
    return cls(error_code, message, context=context)


def raise_for_code(error_code: int, message: str | None = None, *, context: str = "") -> None:
    """Raise :func:`error_for_code` unless ``error_code`` is 0 (NONE)."""
    if error_code:
        raise error_for_code(error_code, message, context=context)
