"""Configuration styles and the exception tree, without a broker."""

from __future__ import annotations

import pytest

from broker.client import errors
from broker.client._config import ConsumerConfig, ProducerConfig, build_config


def test_dotted_names_and_keywords_merge_with_keywords_winning():
    cfg = build_config(ProducerConfig, {"bootstrap.servers": "h1:1,h2:2", "linger.ms": 7, "acks": "all"},
                       {"linger_ms": 9})
    assert cfg.linger_ms == 9 and cfg.acks == -1
    assert cfg.bootstrap_list() == [("h1", 1), ("h2", 2)]


def test_bootstrap_forms():
    cfg = build_config(ConsumerConfig, None, {"bootstrap_servers": ["PLAINTEXT://a:9093", "b"]})
    assert cfg.bootstrap_list() == [("a", 9093), ("b", 9092)]
    with pytest.raises(errors.ConfigError):
        build_config(ConsumerConfig, None, {"bootstrap_servers": "a:notaport"}).bootstrap_list()


@pytest.mark.parametrize("bad", [{"compression.type": "brotli"}, {"acks": 2}, {"nonsense": 1},
                                 {"max.in.flight.requests.per.connection": 0}])
def test_bad_producer_config(bad):
    with pytest.raises(errors.ConfigError):
        build_config(ProducerConfig, bad, {})


def test_consumer_reset_names():
    assert build_config(ConsumerConfig, {"auto.offset.reset": "smallest"}, {}).auto_offset_reset == "earliest"
    with pytest.raises(errors.ConfigError, match="auto_offset_reset"):
        build_config(ConsumerConfig, {"auto.offset.reset": "sometimes"}, {})


def test_error_for_code_carries_code_name_and_class():
    err = errors.error_for_code(6, "stale", context="Produce to t-0")
    assert isinstance(err, errors.NotLeaderOrFollowerError) and isinstance(err, errors.RetriableError)
    assert err.retriable and err.error_code == 6 and err.error_name == "NOT_LEADER_OR_FOLLOWER"
    assert str(err) == "NOT_LEADER_OR_FOLLOWER (6) in Produce to t-0: stale"
    other = errors.error_for_code(87)  # a code without its own class
    assert type(other) is errors.BrokerResponseError and not other.retriable
    assert other.error_name == "INVALID_RECORD"
    assert isinstance(errors.error_for_code(22), errors.GroupError)
    errors.raise_for_code(0)
    with pytest.raises(errors.TopicAlreadyExistsError):
        errors.raise_for_code(36)


def test_our_misuse_is_kept_apart_from_peer_errors():
    assert issubclass(errors.ConfigError, ValueError) and not issubclass(errors.ConfigError, errors.BrokerResponseError)
    assert errors.KafkaTimeoutError().error_code == 7
    assert errors.UnsupportedApiError("x").error_code == 35


def test_text_values_are_converted_as_in_a_properties_file():
    cfg = build_config(ProducerConfig, {"linger.ms": "2", "batch.size": " 1000 ", "acks": "1",
                                        "compression.level": "3", "enable.idempotence": "false"}, {})
    assert (cfg.linger_ms, cfg.batch_size, cfg.acks, cfg.compression_level, cfg.enable_idempotence) == (
        2.0, 1000, 1, 3, False)
    cfg = build_config(ConsumerConfig, {"enable.auto.commit": "FALSE", "max.poll.records": "7",
                                        "client.id": "123", "group.id": "42"}, {})
    assert cfg.enable_auto_commit is False and cfg.max_poll_records == 7
    assert cfg.client_id == "123" and cfg.group_id == "42"  # text properties stay text


@pytest.mark.parametrize("bad, words", [
    ({"linger.ms": "soon"}, "'linger.ms' must be a number"),
    ({"batch.size": "1.5"}, "'batch.size' must be an integer"),
    ({"enable.idempotence": "maybe"}, "'enable.idempotence' must be true or false"),
    ({"acks": "most"}, "acks must be 0, 1 or all"),
])
def test_bad_text_values_name_the_property(bad, words):
    with pytest.raises(errors.ConfigError, match=words):
        build_config(ProducerConfig, bad, {})


def test_a_client_accepts_text_properties():
    from broker.client import Consumer

    with pytest.raises(errors.ConfigError, match="max.poll.records"):
        Consumer({"max.poll.records": "many"})


def test_idempotence_is_on_by_default_and_off_only_where_kafka_turns_it_off():
    def idempotence(**props):
        return build_config(ProducerConfig, {}, props).enable_idempotence

    assert idempotence() is True  # acks=all, retries and five in flight by default
    assert idempotence(transactional_id="t") is True
    # the Java client 3.2+ turns the default off, without a word, for these
    assert idempotence(acks=1) is False
    assert idempotence(acks=0) is False
    assert idempotence(retries=0) is False
    assert idempotence(max_in_flight_requests_per_connection=6) is False
    assert idempotence(enable_idempotence=False) is False


@pytest.mark.parametrize("props, words", [
    ({"enable.idempotence": "true", "acks": "1"}, "enable_idempotence needs acks=all, not 1"),
    ({"enable.idempotence": True, "retries": 0}, "enable_idempotence needs retries >= 1"),
    ({"enable.idempotence": True, "max.in.flight.requests.per.connection": 6},
     "max_in_flight_requests_per_connection <= 5, not 6"),
    ({"transactional.id": "t", "enable.idempotence": False}, "transactional producer needs enable_idempotence"),
])
def test_idempotence_asked_for_with_settings_that_rule_it_out_is_an_error(props, words):
    with pytest.raises(errors.ConfigError, match=words):
        build_config(ProducerConfig, props, {})
