"""Group configs: per-group settings an operator sets on a live cluster (Kafka 4.1's ``ConfigResource.Type.GROUP``,
config resource type 32), whether or not the group exists yet.

The configs (:data:`GROUP_CONFIGS`, Kafka's ``GroupConfig``), each defaulting to a broker property and bounded by
two others (the broker's ``group.consumer.*`` and ``group.share.*`` properties, read with Kafka's defaults when this
broker has no such property)::

    consumer.session.timeout.ms       INT  group.consumer.session.timeout.ms (45000), >= 1,
                                           within group.consumer.{min,max}.session.timeout.ms (45000..60000)
    consumer.heartbeat.interval.ms    INT  group.consumer.heartbeat.interval.ms (5000), >= 1,
                                           within group.consumer.{min,max}.heartbeat.interval.ms (5000..15000)
    share.session.timeout.ms          INT  group.share.session.timeout.ms (45000), >= 1,
                                           within group.share.{min,max}.session.timeout.ms (45000..60000)
    share.heartbeat.interval.ms       INT  group.share.heartbeat.interval.ms (5000), >= 1,
                                           within group.share.{min,max}.heartbeat.interval.ms (5000..15000)
    share.record.lock.duration.ms     INT  group.share.record.lock.duration.ms (30000), >= 1000,
                                           within group.share.{min,max}.record.lock.duration.ms (15000..60000)
    share.delivery.count.limit        INT  group.share.delivery.count.limit (5), >= 2,
                                           within group.share.{min,max}.delivery.count.limit (2..10)
    share.partition.max.record.locks  INT  group.share.partition.max.record.locks (2000), >= 100,
                                           within group.share.{min,max}.partition.max.record.locks (100..4000)
    share.auto.offset.reset           STRING "latest": earliest, latest or by_duration:<ISO-8601 duration>
                                           (PnDTnHnMn.nS, not negative)
    share.isolation.level             STRING "read_uncommitted": read_committed or read_uncommitted

A change is checked as Kafka's ``GroupConfig.validate`` checks it: the group's overrides over the broker's
defaults, every name known ("Unknown group config name: X"), every value parsed, then each INT within its
broker bounds ("share.record.lock.duration.ms must be less than or equal to
group.share.max.record.lock.duration.ms") and each session timeout above its heartbeat interval; any failure is
INVALID_CONFIG, and so is a null value ("Null value not supported for group configs"). An empty group name is
INVALID_REQUEST ("Default group resources are not allowed.").

Stored as ``/config/groups/<group id URL-encoded as Kafka's Sanitizer does>``, ``{"version":1,"config":{...}}``
(the node goes when its last override goes), followed by a ``/config/changes/config_change_N`` notification
with ``entity_path`` ``groups/<sanitized id>`` that makes every broker read the node again
(:meth:`broker.server.topics.TopicManager.start` follows the notifications).

:class:`GroupConfigs` is this broker's copy, ``broker.group_configs``: loaded at start, kept up to date by the
notifications, read synchronously (:meth:`~GroupConfigs.get`, :meth:`~GroupConfigs.value`). As Kafka's
``GroupConfig.evaluate``, :meth:`~GroupConfigs.value` brings a stored value that the broker's bounds no longer
allow (they changed since) within them, with a warning.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from broker.protocol import ErrorCode
from broker.sasl import desanitize_user, sanitize_user
from broker.server.topics import TopicError, store_call

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.config")

INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    """One group config: its type, the broker property giving its default (with Kafka's value of that
    property, for a broker without it), its least value and the broker properties bounding it."""

    name: str
    type: str  # "INT" or "STRING"
    default_property: str | None
    default: int | str
    at_least: int | None = None
    min_property: tuple[str, int] | None = None
    max_property: tuple[str, int] | None = None
    doc: str = ""


def _int(name: str, default: tuple[str, int], at_least: int, low: tuple[str, int], high: tuple[str, int],
         doc: str) -> GroupConfigKey:
    return GroupConfigKey(name, "INT", default[0], default[1], at_least, low, high, doc)


#: Kafka's group configs, in the order Kafka checks their bounds.
GROUP_CONFIGS: dict[str, GroupConfigKey] = {key.name: key for key in (
    _int("consumer.heartbeat.interval.ms", ("group.consumer.heartbeat.interval.ms", 5000), 1,
         ("group.consumer.min.heartbeat.interval.ms", 5000), ("group.consumer.max.heartbeat.interval.ms", 15000),
         "The heartbeat interval given to the members of a consumer group."),
    _int("consumer.session.timeout.ms", ("group.consumer.session.timeout.ms", 45000), 1,
         ("group.consumer.min.session.timeout.ms", 45000), ("group.consumer.max.session.timeout.ms", 60000),
         "The timeout to detect client failures when using the consumer group protocol."),
    _int("share.heartbeat.interval.ms", ("group.share.heartbeat.interval.ms", 5000), 1,
         ("group.share.min.heartbeat.interval.ms", 5000), ("group.share.max.heartbeat.interval.ms", 15000),
         "The heartbeat interval given to the members of a share group."),
    _int("share.session.timeout.ms", ("group.share.session.timeout.ms", 45000), 1,
         ("group.share.min.session.timeout.ms", 45000), ("group.share.max.session.timeout.ms", 60000),
         "The timeout to detect client failures when using the share group protocol."),
    _int("share.record.lock.duration.ms", ("group.share.record.lock.duration.ms", 30000), 1000,
         ("group.share.min.record.lock.duration.ms", 15000), ("group.share.max.record.lock.duration.ms", 60000),
         "The record acquisition lock duration in milliseconds for share groups."),
    _int("share.delivery.count.limit", ("group.share.delivery.count.limit", 5), 2,
         ("group.share.min.delivery.count.limit", 2), ("group.share.max.delivery.count.limit", 10),
         "The maximum number of delivery attempts for a record delivered to a share group."),
    _int("share.partition.max.record.locks", ("group.share.partition.max.record.locks", 2000), 100,
         ("group.share.min.partition.max.record.locks", 100), ("group.share.max.partition.max.record.locks", 4000),
         "Share-group record lock limit per share-partition."),
    GroupConfigKey("share.auto.offset.reset", "STRING", None, "latest",
                   doc="The strategy to initialize the share-partition start offset: earliest, latest or "
                       "by_duration:<duration> (ISO-8601, PnDTnHnMn.nS, not negative)."),
    GroupConfigKey("share.isolation.level", "STRING", None, "read_uncommitted",
                   doc="Controls how to read records written transactionally: read_committed or read_uncommitted."),
)}

#: Every broker property the group configs read (defaults and bounds), with Kafka's default of each.
BROKER_PROPERTIES: dict[str, int] = {
    prop: value for key in GROUP_CONFIGS.values() if key.type == "INT"
    for prop, value in ((key.default_property, key.default), key.min_property, key.max_property)}

#: (session timeout, heartbeat interval): the first must exceed the second, as Kafka checks
_SESSION_OVER_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                           ("share.session.timeout.ms", "share.heartbeat.interval.ms"))

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")

# Java's Duration.parse: PnDTnHnMn.nS, signs allowed on the whole and on each part, case-insensitive
_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:(T)(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?)(\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def _duration_nanos(text: str) -> int:
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    sign, days, t, hours, minutes, seconds_sign, seconds, fraction = match.groups()
    if days is None and t is None or t is not None and hours is None and minutes is None and seconds is None:
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    nanos = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * 10**9
    if seconds is not None:
        part = int(seconds) * 10**9 + int((fraction or "").ljust(9, "0"))
        nanos += -part if seconds_sign == "-" else part
    return -nanos if sign == "-" else nanos


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads it (``PT1H``, ``P1DT30M``, ``PT0.5S``), in
    milliseconds (truncated toward zero, as ``Duration.toMillis``); ValueError when it is not one."""
    nanos = _duration_nanos(text)
    return nanos // 10**6 if nanos >= 0 else -(-nanos // 10**6)


def auto_offset_reset_duration_ms(value: str) -> int | None:
    """The duration of a ``by_duration:<duration>`` ``share.auto.offset.reset``, in ms; None for earliest and
    latest; ValueError when the duration does not parse."""
    if not value.lower().startswith("by_duration:"):
        return None
    return parse_duration_ms(value[len("by_duration:"):])


def _invalid(name: str, value: Any, reason: str) -> ValueError:
    """Kafka's ``ConfigException(name, value, message)`` text."""
    return ValueError(f"Invalid value {value} for configuration {name}: {reason}")


def parse_value(name: str, text: str) -> int | str:
    """A group config's value parsed and checked against its own rules (not the broker bounds); ValueError with
    Kafka's message."""
    key = GROUP_CONFIGS[name]
    if key.type == "INT":
        stripped = str(text).strip()
        if not re.fullmatch(r"[-+]?\d+", stripped) or not -INT_MAX - 1 <= int(stripped) <= INT_MAX:
            raise _invalid(name, text, "Not a number of type INT")
        value = int(stripped)
        if key.at_least is not None and value < key.at_least:
            raise _invalid(name, value, f"Value must be at least {key.at_least}")
        return value
    value = str(text).strip()
    if name == "share.isolation.level":
        if value not in ISOLATION_LEVELS:
            raise _invalid(name, value, f"String must be one of: {', '.join(ISOLATION_LEVELS)}")
    elif name == "share.auto.offset.reset":  # Kafka's ShareGroupAutoOffsetResetStrategy: any case
        if not value.lower().startswith("by_duration:"):
            if value.lower() not in ("earliest", "latest"):
                raise _invalid(name, value, "The value must be either 'earliest', 'latest' or of the format "
                                            "'by_duration:<PnDTnHnMn.nS.>'.")
            return value.lower()
        duration = value[len("by_duration:"):]
        try:
            negative = _duration_nanos(duration) < 0
        except ValueError:
            raise _invalid(name, value, "Unable to parse duration string in by_duration strategy.") from None
        if negative:
            raise _invalid(name, value, "Negative duration is not supported in by_duration strategy.")
        return f"by_duration:{duration}"
    return value


def broker_property(config: Any, name: str, fallback: int | str) -> int | str:
    """A broker property by its Kafka name, or ``fallback`` (Kafka's default) when this broker has none such."""
    return getattr(config, name.replace(".", "_"), fallback)


def broker_defaults(config: Any) -> dict[str, int | str]:
    """Every group config's default on this broker."""
    return {name: key.default if key.default_property is None else broker_property(config, key.default_property,
                                                                                     key.default)
            for name, key in GROUP_CONFIGS.items()}


def broker_bounds(config: Any, name: str) -> tuple[tuple[str, int], tuple[str, int]] | None:
    """``((min property, min), (max property, max))`` of an INT group config on this broker; None for a STRING."""
    key = GROUP_CONFIGS[name]
    if key.min_property is None or key.max_property is None:
        return None
    (low_name, low), (high_name, high) = key.min_property, key.max_property
    return (low_name, broker_property(config, low_name, low)), (high_name, broker_property(config, high_name, high))


def validate(overrides: Mapping[str, str | None], config: Any) -> dict[str, int | str]:
    """Kafka's ``GroupConfig.validate`` of a group's complete overrides on this broker: the effective values, or
    TopicError(INVALID_CONFIG) with Kafka's message."""
    nulls = sorted(name for name, value in overrides.items() if value is None)
    if nulls:
        raise TopicError(ErrorCode.INVALID_CONFIG, f"Null value not supported for group configs: {','.join(nulls)}")
    for name in sorted(overrides):
        if name not in GROUP_CONFIGS:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
    values = broker_defaults(config)
    for name, text in overrides.items():
        try:
            values[name] = parse_value(name, text)
        except ValueError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    for name in GROUP_CONFIGS:
        bounds = broker_bounds(config, name)
        if bounds is None:
            continue
        (low_name, low), (high_name, high) = bounds
        if values[name] < low:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"{name} must be greater than or equal to {low_name}")
        if values[name] > high:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"{name} must be less than or equal to {high_name}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if values[session] <= values[heartbeat]:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"{session} must be greater than {heartbeat}")
    return values


def sanitize_group(group_id: str) -> str:
    """A group id as a znode name (URL-encoded, ``*`` as ``%2A``, a space as ``%20``), as Kafka's Sanitizer."""
    return sanitize_user(group_id)


class GroupConfigs:
    """This broker's copy of every group's config overrides (see the module docstring).

    :meth:`load` and :meth:`read` block on the store (at start, or in an executor); :meth:`apply` and
    :meth:`alter` run on the loop. :meth:`get` and :meth:`value` are dict lookups that any thread may make:
    each group's entry is replaced whole, never changed in place.
    """

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.defaults: dict[str, int | str] = broker_defaults(broker.config)
        self._overrides: dict[str, dict[str, str]] = {}
        self._values: dict[str, dict[str, int | str]] = {}
        #: ``callback(group_id)`` after a group's configs changed here (an alter on this broker or a notification)
        self.listeners: list[Callable[[str], None]] = []

    # -- reading ---------------------------------------------------------------------------------
    def get(self, group_id: str) -> dict[str, str]:
        """The group's overrides as stored (name -> text); {} when it has none."""
        return dict(self._overrides.get(group_id, {}))

    def value(self, group_id: str, name: str) -> int | str:
        """The group's effective value of ``name``: its override (within the broker's current bounds), else this
        broker's default; an int for INT configs, a str for STRING ones. KeyError for an unknown name."""
        found = self._values.get(group_id)
        return found[name] if found is not None else self.defaults[name]

    def values(self, group_id: str) -> dict[str, int | str]:
        """Every group config's effective value for the group (see :meth:`value`)."""
        return dict(self._values.get(group_id, self.defaults))

    def groups(self) -> list[str]:
        """The ids of the groups with overrides."""
        return sorted(self._overrides)

    def _effective(self, group_id: str, overrides: Mapping[str, str]) -> dict[str, int | str]:
        """Defaults, then each override that parses, brought within the broker's bounds (Kafka's
        ``GroupConfig.evaluate``); what does not parse or is unknown is logged and left out."""
        config = self.broker.config
        values = dict(self.defaults)
        for name, text in overrides.items():
            if name not in GROUP_CONFIGS:
                log.warning("group %s: ignoring unknown stored group config %s", group_id, name)
                continue
            try:
                value = parse_value(name, text)
            except ValueError as exc:
                log.warning("group %s: ignoring bad stored group config (%s)", group_id, exc)
                continue
            bounds = broker_bounds(config, name)
            if bounds is not None:
                (_n, low), (_m, high) = bounds
                if not low <= value <= high:
                    capped = min(max(value, low), high)
                    log.warning("group %s: %s=%d is outside the broker's bounds %d..%d; %d is in force",
                                group_id, name, value, low, high, capped)
                    value = capped
            values[name] = value
        return values

    # -- the store -----------------------------------------------------------------------------
    def load(self) -> None:
        """Blocking: read every group's overrides (at start, before the listeners accept)."""
        metadata = self.broker.metadata
        for sanitized in metadata.groups_with_configs():
            group_id, overrides = self.read(sanitized)
            self._set(group_id, overrides)
        if self._overrides:
            log.info("group configs of %d group(s) loaded", len(self._overrides))

    def read(self, sanitized: str) -> tuple[str, dict[str, str]]:
        """Blocking: ``(group id, overrides)`` of the node a ``groups/<sanitized>`` notification names."""
        return desanitize_user(sanitized), self.broker.metadata.group_config(sanitized)

    def apply(self, group_id: str, overrides: Mapping[str, str]) -> None:
        """Put a group's overrides (as read from the store) in force here; tell the listeners."""
        self._set(group_id, overrides)
        for listener in list(self.listeners):
            try:
                listener(group_id)
            except Exception:  # noqa: BLE001 - one listener's bug must not stop config changes
                log.exception("group config listener failed for group %s", group_id)

    def _set(self, group_id: str, overrides: Mapping[str, str]) -> None:
        if overrides:
            self._values[group_id] = self._effective(group_id, overrides)
            self._overrides[group_id] = dict(overrides)
        else:
            self._overrides.pop(group_id, None)
            self._values.pop(group_id, None)

    async def alter(self, group_id: str, change: Callable[[dict[str, str]], dict], validate_only: bool) -> None:
        """Apply ``change`` (current overrides -> new ones) to a group's configs: checked (:func:`validate`),
        stored, notified and in force here at once; TopicError."""
        if not group_id:
            raise TopicError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        if group_id in (".", ".."):  # no znode can be named so
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Group name {group_id!r} is not allowed for group configs")
        sanitized = sanitize_group(group_id)
        metadata = self.broker.metadata
        current = await store_call(self.broker, metadata.group_config, sanitized)
        new = change(dict(current))
        validate(new, self.broker.config)
        if validate_only:
            return
        await store_call(self.broker, metadata.set_group_config, sanitized, new)
        self.apply(group_id, new)
        log.info("group %s: configs now %s", group_id,
                 ", ".join(f"{k}={v}" for k, v in sorted(new.items())) or "the defaults")
