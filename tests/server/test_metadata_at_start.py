"""Metadata asked for while a restarting broker has not yet had its first UpdateMetadata.

The listeners accept before the broker has registered and heard from the
controller, as Kafka's do. In that window the broker knows no live broker, not
even itself, so it must not try to auto-create a topic that may well exist: that
would answer INVALID_REPLICATION_FACTOR (which aiokafka's producer treats as
fatal) where Kafka answers LEADER_NOT_AVAILABLE, which every client retries.
"""

from __future__ import annotations

import threading

from broker.protocol import ApiKey, ErrorCode

from .wire import Wire


def ask_until_stopped(bootstrap: str, topic: str, codes: list[int], stop: threading.Event) -> None:
    """Metadata(allow_auto_topic_creation) for ``topic`` on fresh connections, as fast as they open."""
    while not stop.is_set():
        try:
            with Wire(bootstrap, timeout=5) as wire:
                while not stop.is_set():
                    response = wire.call(ApiKey.METADATA, 9, {"topics": [{"name": topic}],
                                                              "allow_auto_topic_creation": True,
                                                              "include_cluster_authorized_operations": False,
                                                              "include_topic_authorized_operations": False})
                    codes.append(response["topics"][0]["error_code"])
        except OSError:  # not listening yet, or the connection went with the old process
            pass


def test_metadata_during_a_restart_never_answers_a_fatal_error(broker_factory):
    broker = broker_factory({"auto.create.topics.enable": True})
    with Wire(broker.bootstrap) as wire:  # auto-creates the topic
        first = wire.call(ApiKey.METADATA, 9, {"topics": [{"name": "kept"}], "allow_auto_topic_creation": True,
                                               "include_cluster_authorized_operations": False,
                                               "include_topic_authorized_operations": False})
    assert first["topics"][0]["error_code"] in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
    for _round in range(3):
        broker.kill()
        codes: list[int] = []
        stop = threading.Event()
        asker = threading.Thread(target=ask_until_stopped, args=(broker.bootstrap, "kept", codes, stop))
        asker.start()
        try:
            broker.start()
            while not codes or codes[-1] != ErrorCode.NONE:
                assert asker.is_alive()
                stop.wait(0.05)
        finally:
            stop.set()
            asker.join(30)
        assert set(codes) <= {ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE}, codes
