"""Group configs (Kafka 4.1's GROUP config resource, type 32) on a broker process.

confluent-kafka's AdminClient (librdkafka, which sends ResourceType.GROUP as config resource 32) sets,
describes and deletes them; what librdkafka refuses to send (an empty group name, a null value) and the
fields it does not show (config types, synonyms, ``configuration_keys``) are read over a raw socket
(:class:`tests.server.wire.Wire`).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from broker.cluster import ClusterMetadata, EmbeddedStore
from broker.config import BrokerConfig
from broker.protocol import ApiKey, ErrorCode
from broker.server.group_configs import GroupConfigs, parse_duration_ms, sanitize_group

from .test_authorization_groups import _acl_broker, _allow, _conf
from .wire import Wire

pytestmark = [pytest.mark.clients,
              pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")]

WAIT_S = 30  # a guard against a hang, not a performance assertion
GROUP = 32  # the config resource type

DEFAULTS = {
    "consumer.heartbeat.interval.ms": "5000",
    "consumer.session.timeout.ms": "45000",
    "share.heartbeat.interval.ms": "5000",
    "share.session.timeout.ms": "45000",
    "share.record.lock.duration.ms": "30000",
    "share.delivery.count.limit": "5",
    "share.partition.max.record.locks": "2000",
    "share.auto.offset.reset": "latest",
    "share.isolation.level": "read_uncommitted",
}


def describe(client: AdminClient, group: str) -> dict[str, tuple[str, ConfigSource]]:
    (future,) = client.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    entries = future.result(timeout=WAIT_S)
    assert all(not e.is_read_only and not e.is_sensitive for e in entries.values())
    return {name: (e.value, ConfigSource(e.source)) for name, e in entries.items()}


def alter(client: AdminClient, group: str, *entries: ConfigEntry, validate_only: bool = False):
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=list(entries))
    (future,) = client.incremental_alter_configs([resource], validate_only=validate_only).values()
    return future


def set_(name: str, value: str) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def delete(name: str) -> ConfigEntry:
    return ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=WAIT_S)
    return info.value.args[0]


def overrides(client: AdminClient, group: str) -> dict[str, str]:
    """The group's configs that are not at their default, each checked to say GROUP_CONFIG."""
    described = describe(client, group)
    assert set(described) == set(DEFAULTS)
    out = {}
    for name, (value, source) in described.items():
        if source is ConfigSource.GROUP_CONFIG:
            out[name] = value
        else:
            assert (value, source) == (DEFAULTS[name], ConfigSource.DEFAULT_CONFIG), name
    return out


def test_set_describe_and_delete_group_configs(broker):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    # no such group: every config at the broker's default
    assert describe(client, "billing") == {n: (v, ConfigSource.DEFAULT_CONFIG) for n, v in DEFAULTS.items()}

    alter(client, "billing", set_("share.auto.offset.reset", "earliest"),
          set_("share.partition.max.record.locks", "100"),
          set_("share.record.lock.duration.ms", "15000")).result(timeout=WAIT_S)
    assert overrides(client, "billing") == {"share.auto.offset.reset": "earliest",
                                            "share.partition.max.record.locks": "100",
                                            "share.record.lock.duration.ms": "15000"}
    assert overrides(client, "other") == {}  # per group

    # SET and DELETE in one request; the configs not named keep their overrides
    alter(client, "billing", delete("share.record.lock.duration.ms"),
          set_("share.auto.offset.reset", "by_duration:PT1H")).result(timeout=WAIT_S)
    assert overrides(client, "billing") == {"share.auto.offset.reset": "by_duration:PT1H",
                                            "share.partition.max.record.locks": "100"}

    alter(client, "billing", set_("share.isolation.level", "read_committed"),
          validate_only=True).result(timeout=WAIT_S)
    assert "share.isolation.level" not in overrides(client, "billing")

    # AlterConfigs replaces the whole set
    (future,) = client.alter_configs([ConfigResource(ResourceType.GROUP, "billing",
                                                     set_config={"share.isolation.level": "read_committed"})]).values()
    future.result(timeout=WAIT_S)
    assert overrides(client, "billing") == {"share.isolation.level": "read_committed"}

    alter(client, "billing", delete("share.isolation.level")).result(timeout=WAIT_S)
    assert overrides(client, "billing") == {}


def test_bad_group_configs_are_refused_and_change_nothing(broker):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    alter(client, "g", set_("share.record.lock.duration.ms", "20000")).result(timeout=WAIT_S)
    refused = [
        (set_("share.auto.offset.reset", "earliest"), set_("no.such.config", "1"),
         KafkaError.INVALID_CONFIG, "Unknown group config name: no.such.config"),
        (set_("share.record.lock.duration.ms", "70000"),
         KafkaError.INVALID_CONFIG,
         "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"),
        (set_("share.record.lock.duration.ms", "10000"),
         KafkaError.INVALID_CONFIG,
         "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
        (set_("share.record.lock.duration.ms", "500"), KafkaError.INVALID_CONFIG,
         "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
        (set_("consumer.session.timeout.ms", "soon"), KafkaError.INVALID_CONFIG,
         "Invalid value soon for configuration consumer.session.timeout.ms: Not a number of type INT"),
        (set_("share.delivery.count.limit", "11"), KafkaError.INVALID_CONFIG,
         "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"),
        (set_("share.partition.max.record.locks", "4001"), KafkaError.INVALID_CONFIG,
         "share.partition.max.record.locks must be less than or equal to group.share.max.partition.max.record.locks"),
        (set_("share.isolation.level", "READ_COMMITTED"), KafkaError.INVALID_CONFIG,
         "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be one of: "
         "read_committed, read_uncommitted"),
        (set_("share.auto.offset.reset", "by_duration:-PT1H"), KafkaError.INVALID_CONFIG,
         "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: "
         "Negative duration is not supported in by_duration strategy."),
        (set_("share.auto.offset.reset", "newest"), KafkaError.INVALID_CONFIG, None),
        (ConfigEntry("share.record.lock.duration.ms", "1000", incremental_operation=AlterConfigOpType.APPEND),
         KafkaError.INVALID_REQUEST, None),
    ]
    for *entries, code, message in refused:
        error = error_of(alter(client, "g", *entries))
        assert error.code() == code, (entries, error)
        if message is not None:
            assert error.str() == message
    assert overrides(client, "g") == {"share.record.lock.duration.ms": "20000"}


def test_what_librdkafka_does_not_send_or_show(broker):
    with Wire(broker.bootstrap) as wire:
        def incremental(name: str, configs: list[dict]) -> dict:
            (r,) = wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
                "resources": [{"resource_type": GROUP, "resource_name": name, "configs": configs}],
                "validate_only": False})["responses"]
            return r

        def replace(name: str, configs: dict) -> dict:
            (r,) = wire.call(ApiKey.ALTER_CONFIGS, 1, {
                "resources": [{"resource_type": GROUP, "resource_name": name,
                               "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "validate_only": False})["responses"]
            return r

        def described(name: str, keys=None, version: int = 4) -> dict:
            (r,) = wire.call(ApiKey.DESCRIBE_CONFIGS, version, {
                "resources": [{"resource_type": GROUP, "resource_name": name, "configuration_keys": keys}],
                "include_synonyms": True, "include_documentation": False})["results"]
            return r

        set_lock = {"name": "share.record.lock.duration.ms", "config_operation": 0, "value": "20000"}
        empty = incremental("", [set_lock])
        assert (empty["error_code"], empty["error_message"]) == (ErrorCode.INVALID_REQUEST,
                                                                 "Default group resources are not allowed.")
        assert replace("", {"share.isolation.level": "read_committed"})["error_code"] == ErrorCode.INVALID_REQUEST
        assert described("")["error_code"] == ErrorCode.INVALID_REQUEST and described("")["configs"] == []

        null = incremental("w", [{"name": "share.isolation.level", "config_operation": 0, "value": None}])
        assert (null["error_code"], null["error_message"]) == (
            ErrorCode.INVALID_CONFIG, "Null value not supported for group configs: share.isolation.level")
        null = replace("w", {"share.isolation.level": None})
        assert null["error_code"] == ErrorCode.INVALID_CONFIG
        assert null["error_message"].startswith("Null value not supported for group configs")

        assert incremental("w", [set_lock])["error_code"] == ErrorCode.NONE
        result = described("w", ["share.record.lock.duration.ms", "share.auto.offset.reset", "no.such.config"])
        assert result["error_code"] == ErrorCode.NONE
        configs = [{k: v for k, v in c.items() if k != "is_default"} for c in result["configs"]]  # v0's field
        assert sorted(configs, key=lambda c: c["name"]) == [
            {"name": "share.auto.offset.reset", "value": "latest", "read_only": False, "config_source": 5,
             "is_sensitive": False, "config_type": 2, "documentation": None,
             "synonyms": [{"name": "share.auto.offset.reset", "value": "latest", "source": 5}]},
            {"name": "share.record.lock.duration.ms", "value": "20000", "read_only": False, "config_source": 8,
             "is_sensitive": False, "config_type": 3, "documentation": None,
             "synonyms": [{"name": "share.record.lock.duration.ms", "value": "20000", "source": 8}]},
        ]
        (v0,) = described("w", ["share.record.lock.duration.ms"], version=0)["configs"]
        assert (v0["value"], v0["is_default"]) == ("20000", False)


def test_group_configs_survive_a_restart(broker):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    alter(client, "team a/b*", set_("share.auto.offset.reset", "earliest"),
          set_("share.session.timeout.ms", "50000")).result(timeout=WAIT_S)
    broker.restart()
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert overrides(client, "team a/b*") == {"share.auto.offset.reset": "earliest",
                                              "share.session.timeout.ms": "50000"}
    # the last override deleted: the defaults again, after another restart too
    alter(client, "team a/b*", delete("share.auto.offset.reset"), delete("share.session.timeout.ms")
          ).result(timeout=WAIT_S)
    broker.restart()
    assert overrides(AdminClient({"bootstrap.servers": broker.bootstrap}), "team a/b*") == {}


def test_group_configs_need_the_group_acls(broker_factory):
    broker = _acl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "admin"))
    alice = AdminClient(_conf(broker, "alice"))
    lock = set_("share.record.lock.duration.ms", "20000")
    assert error_of(alter(alice, "g", lock)).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    (future,) = alice.describe_configs([ConfigResource(ResourceType.GROUP, "g")]).values()
    assert error_of(future).code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    _allow(admin, "User:alice", ResourceType.GROUP, "g", AclOperation.DESCRIBE_CONFIGS)
    assert overrides(alice, "g") == {}
    assert error_of(alter(alice, "g", lock)).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    _allow(admin, "User:alice", ResourceType.GROUP, "g", AclOperation.ALTER_CONFIGS)
    alter(alice, "g", lock).result(timeout=WAIT_S)
    assert overrides(alice, "g") == {"share.record.lock.duration.ms": "20000"}
    # an ACL on group g says nothing about group h
    assert error_of(alter(alice, "h", lock)).code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_the_broker_properties_set_the_defaults_and_bounds(broker_factory):
    broker = broker_factory(group_share_record_lock_duration_ms=20000,
                            group_share_max_record_lock_duration_ms=120000)
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert describe(client, "g")["share.record.lock.duration.ms"] == ("20000", ConfigSource.DEFAULT_CONFIG)
    alter(client, "g", set_("share.record.lock.duration.ms", "90000")).result(timeout=WAIT_S)
    error = error_of(alter(client, "g", set_("share.record.lock.duration.ms", "130000")))
    assert error.str() == ("share.record.lock.duration.ms must be less than or equal to "
                           "group.share.max.record.lock.duration.ms")


def test_stored_values_the_bounds_no_longer_allow_are_capped(tmp_path):
    """What the share groups read (``broker.group_configs.value``): a value stored under wider bounds is
    used at the nearest bound of the broker's current ones, as Kafka's ``GroupConfig.evaluate``."""
    metadata = ClusterMetadata(EmbeddedStore(tmp_path))
    metadata.start()
    try:
        metadata.set_group_config(sanitize_group("team a/b*"), {"share.record.lock.duration.ms": "90000",
                                                                "share.auto.offset.reset": "Earliest"})
        config = BrokerConfig({"log.dirs": str(tmp_path), "group.share.record.lock.duration.ms": 20000})
        configs = GroupConfigs(SimpleNamespace(config=config, metadata=metadata))  # a Broker's config and store
        configs.load()
        assert configs.groups() == ["team a/b*"]
        assert configs.get("team a/b*") == {"share.record.lock.duration.ms": "90000",
                                            "share.auto.offset.reset": "Earliest"}
        assert configs.value("team a/b*", "share.record.lock.duration.ms") == 60000
        assert configs.value("team a/b*", "share.auto.offset.reset") == "earliest"
        assert configs.value("team a/b*", "share.delivery.count.limit") == 5
        assert configs.value("other", "share.record.lock.duration.ms") == 20000
        assert configs.get("other") == {}
    finally:
        metadata.close()


@pytest.mark.parametrize("text, ms", [("PT1H", 3_600_000), ("P1D", 86_400_000), ("pt0.5s", 500),
                                      ("P1DT2H3M4.5S", 93_784_500), ("-PT1M", -60_000), ("PT-1.5S", -1500)])
def test_iso_8601_durations_as_java_reads_them(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "PT1H2", "P1H", "PT1.5M"])
def test_what_is_not_an_iso_8601_duration(text):
    with pytest.raises(ValueError):
        parse_duration_ms(text)
