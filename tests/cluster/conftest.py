"""The cluster harness: N real broker processes on one real ZooKeeper chroot.

``cluster_factory(size=3, **props)`` starts brokers with ``broker.id`` 1..size
(processes from ``broker_factory``, each with its own log dir and an ephemeral
port), all on the test's ``zk_connect`` chroot with a short
``zookeeper.session.timeout.ms`` (6000 unless given), and returns a
:class:`Cluster`. Extra properties use underscores for dots as in
``broker_factory`` (``min_insync_replicas=2``) or a ``props`` dict; a
``per_broker`` dict ``{id: {prop: value}}`` sets properties of single brokers
(``broker.rack``, ``listeners``), ``command_prefix`` ``{id: [...]}`` runs a broker
through a command (``ip netns exec NS``), ``zookeeper_connect`` replaces the
test's chroot (a ZooKeeper the test runs itself).

What a :class:`Cluster` gives a test:

- ``bootstrap`` (every live broker), ``broker(id)``, ``ids``;
- faults by broker id: ``kill`` (SIGKILL), ``pause`` (SIGSTOP), ``resume``
  (SIGCONT), ``stop`` (SIGTERM, clean), ``start`` (again on the same port and
  data, after ``kill`` or ``stop``);
- Kafka's view through the wire: ``metadata(topic, via=id)`` is a Metadata
  response (v9) from one chosen broker; ``leader(topic, p)``; ``coordinator(group)``;
  ``wait_for_leader(topic, p, not_in=...)``, ``wait_for_isr(topic, p, isr)``;
- ZooKeeper's view: ``zk`` (a kazoo client on the chroot),
  ``partition_state(topic, p)`` (the state znode as a dict, or None),
  ``controller_id()`` (from ``/controller``, or None);
- ``wait_until(check, what, limit)``: polls ``check`` until it returns a true
  value (returned) or fails the test naming ``what``.

A paused broker is resumed at teardown before ``broker_factory`` stops every
process with SIGTERM (a stopped process would not act on it) and fails the test
on a non-zero exit or a traceback in a broker's stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest
from kazoo.client import KazooClient

from tests.conftest import BrokerProcess

WAIT_S = 60  # a guard against a hang, not a performance assertion
SESSION_TIMEOUT_MS = 6000


def wait_until(check, what: str, limit: float = WAIT_S, interval: float = 0.1):
    """Poll ``check()`` until it returns a true value; fail naming ``what`` after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    last_exc = None
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception as exc:  # a broker between states answers with errors; keep polling
            last_exc = exc
        else:
            if value:
                return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {limit} s waiting for {what}"
                         + (f" (last error: {last_exc!r})" if last_exc else ""))


async def _request(host: str, port: int, api_key: int, body: dict, version: int) -> dict:
    from broker.client._connection import BrokerConnection

    conn = BrokerConnection(host, port, request_timeout_ms=10000, connect_timeout_ms=5000)
    await conn.connect()
    try:
        return await conn.request(api_key, body, version=version)
    finally:
        conn.close()


async def _metadata(host: str, port: int, topics: list[str] | None) -> dict:
    from broker.client._connection import BrokerConnection
    from broker.protocol import ApiKey

    conn = BrokerConnection(host, port, request_timeout_ms=10000, connect_timeout_ms=5000)
    await conn.connect()
    try:
        return await conn.request(ApiKey.METADATA, {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }, version=9)
    finally:
        conn.close()


class Cluster:
    """Brokers 1..N on one ZooKeeper chroot (see the module docstring)."""

    def __init__(self, brokers: dict[int, BrokerProcess], zk_connect: str) -> None:
        self.brokers = brokers
        self.zk_connect = zk_connect
        self.paused: set[int] = set()
        self._zk: KazooClient | None = None

    # -- brokers -------------------------------------------------------------------------

    @property
    def ids(self) -> list[int]:
        return sorted(self.brokers)

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def live_ids(self) -> list[int]:
        return [i for i in self.ids if self.brokers[i].running() and i not in self.paused]

    @property
    def bootstrap(self) -> str:
        """Every running broker's address (all of them when none runs, for a client started before)."""
        live = self.live_ids() or self.ids
        return ",".join(self.brokers[i].bootstrap for i in live)

    def kill(self, broker_id: int) -> None:
        """SIGKILL the broker; its ZooKeeper session lives on until the session timeout."""
        self.paused.discard(broker_id)
        self.brokers[broker_id].kill()

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the process keeps its sockets and its session until the timeout, and does nothing."""
        os.kill(self.brokers[broker_id].pid, signal.SIGSTOP)
        self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        os.kill(self.brokers[broker_id].pid, signal.SIGCONT)
        self.paused.discard(broker_id)

    def stop(self, broker_id: int) -> int:
        """SIGTERM (a clean shutdown); returns the exit status."""
        if broker_id in self.paused:
            self.resume(broker_id)
        return self.brokers[broker_id].stop()

    def start(self, broker_id: int) -> BrokerProcess:
        """Start a killed or stopped broker again, on the same port and log dir.

        After a SIGKILL its old registration may still be in ZooKeeper (the session
        has not expired); the broker then refuses to start, so wait it out first.
        """
        wait_until(lambda: self.zk.exists(f"/brokers/ids/{broker_id}") is None,
                   f"broker {broker_id}'s old registration to expire", limit=WAIT_S)
        return self.brokers[broker_id].start()

    def restart(self, broker_id: int) -> BrokerProcess:
        """SIGKILL then start again (a crash and a restart)."""
        self.kill(broker_id)
        return self.start(broker_id)

    # -- ZooKeeper's view ----------------------------------------------------------------

    @property
    def zk(self) -> KazooClient:
        if self._zk is None:
            self._zk = KazooClient(hosts=self.zk_connect, timeout=10)
            self._zk.start(timeout=30)
        return self._zk

    def _json(self, path: str) -> dict | None:
        if self.zk.exists(path) is None:
            return None
        try:
            return json.loads(self.zk.get(path)[0])
        except Exception:  # gone between exists and get
            return None

    def partition_state(self, topic: str, partition: int) -> dict | None:
        """``/brokers/topics/T/partitions/P/state`` as a dict (leader, leader_epoch, isr, ...), or None."""
        return self._json(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def controller_id(self) -> int | None:
        doc = self._json("/controller")
        return None if doc is None else doc["brokerid"]

    def registered_ids(self) -> list[int]:
        return sorted(int(i) for i in self.zk.get_children("/brokers/ids")) if self.zk.exists("/brokers/ids") else []

    # -- Kafka's view, over the wire -----------------------------------------------------

    def metadata(self, topics: list[str] | None = None, via: int | None = None) -> dict:
        """A Metadata v9 response from broker ``via`` (the first live broker by default)."""
        via = via if via is not None else self.live_ids()[0]
        b = self.brokers[via]
        return asyncio.run(_metadata(b.host, b.port, topics))

    def coordinator(self, group: str, via: int | None = None) -> int:
        """The group's coordinator as broker ``via`` answers FindCoordinator (v1); -1 while it has none."""
        from broker.protocol import ApiKey

        b = self.brokers[via if via is not None else self.live_ids()[0]]
        answer = asyncio.run(_request(b.host, b.port, ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, 1))
        return answer["node_id"] if answer["error_code"] == 0 else -1

    def partition_meta(self, topic: str, partition: int, via: int | None = None) -> dict | None:
        """One partition's Metadata entry (leader_id, leader_epoch, replica_nodes, isr_nodes, ...)."""
        for t in self.metadata([topic], via)["topics"]:
            if t["name"] == topic and t["error_code"] == 0:
                for p in t["partitions"]:
                    if p["partition_index"] == partition:
                        return p
        return None

    def leader(self, topic: str, partition: int = 0, via: int | None = None) -> int:
        """The partition's leader as broker ``via`` answers (-1 when it has none)."""
        meta = self.partition_meta(topic, partition, via)
        return -1 if meta is None or meta["error_code"] != 0 else meta["leader_id"]

    def wait_for_leader(self, topic: str, partition: int = 0, not_in=(), limit: float = WAIT_S,
                        vias=None) -> int:
        """Wait until the partition state in ZooKeeper names a live leader not in ``not_in``, and the
        metadata of the brokers ``vias`` (default: every live broker) agree; returns the leader's id."""
        def check():
            state = self.partition_state(topic, partition)
            if state is None or state["leader"] in not_in or state["leader"] not in self.live_ids():
                return None
            leader = state["leader"]
            if all(self.leader(topic, partition, via=i) == leader for i in (vias or self.live_ids())):
                return leader
            return None
        return wait_until(check, f"a leader of {topic}-{partition} outside {list(not_in)}", limit)

    def wait_for_isr(self, topic: str, partition: int = 0, isr=None, limit: float = WAIT_S) -> dict:
        """Wait until the partition's ISR in ZooKeeper is exactly ``isr`` (default: every replica)."""
        def check():
            state = self.partition_state(topic, partition)
            if state is None:
                return None
            want = isr
            if want is None:
                doc = self._json(f"/brokers/topics/{topic}")
                want = doc["partitions"][str(partition)] if doc else None
            return state if want is not None and sorted(state["isr"]) == sorted(want) else None
        return wait_until(check, f"the ISR of {topic}-{partition} to be {isr or 'every replica'}", limit)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     config: dict | None = None, assignment: dict | None = None) -> None:
        """CreateTopics through librdkafka's AdminClient; waits for the answer and for every leader."""
        from confluent_kafka.admin import AdminClient, NewTopic

        client = AdminClient({"bootstrap.servers": self.bootstrap})
        if assignment is not None:
            # librdkafka wants the partition count with an assignment (and no replication factor)
            new = NewTopic(name, len(assignment), replica_assignment=[assignment[p] for p in sorted(assignment)],
                           config=config or {})
        else:
            new = NewTopic(name, partitions, replication_factor, config=config or {})
        client.create_topics([new], request_timeout=30)[name].result(WAIT_S)
        for p in range(len(assignment) if assignment else partitions):
            self.wait_for_leader(name, p)

    def close(self) -> None:
        for broker_id in list(self.paused):
            self.resume(broker_id)
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None


@pytest.fixture
def cluster_factory(broker_factory, zk_connect):
    made: list[Cluster] = []

    def make(size: int = 3, props: dict | None = None, per_broker: dict | None = None,
             command_prefix: dict | None = None, zookeeper_connect: str | None = None, **kwargs) -> Cluster:
        connect = zookeeper_connect or zk_connect
        common = {"zookeeper.connect": connect, "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                  "offsets.topic.replication.factor": min(size, 3),
                  **{k.replace("_", "."): v for k, v in kwargs.items()}, **(props or {})}
        brokers = {}
        cluster = Cluster(brokers, connect)
        made.append(cluster)
        for broker_id in range(1, size + 1):
            own = {**common, "broker.id": broker_id, **(per_broker or {}).get(broker_id, {})}
            brokers[broker_id] = broker_factory(props=own, command_prefix=(command_prefix or {}).get(broker_id))
        wait_until(lambda: cluster.registered_ids() == cluster.ids, "every broker to register")
        return cluster

    yield make
    for cluster in made:
        cluster.close()


def failover_keeps_every_record(cluster: Cluster, topic: str, client_conf: dict, count: int = 2000) -> int:
    """Produce ``count`` idempotent acks=all records to partition 0 of ``topic`` (replicated on every broker,
    all in its ISR), SIGKILL its leader, read every record back from the new leader (assigned, not
    subscribed: with a broker down ``__consumer_offsets`` may not be creatable), and return the killed id."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    everyone = sorted(cluster.ids)
    producer = Producer({**client_conf, "acks": "all", "enable.idempotence": True})
    values = [b"rec-%d" % i for i in range(count)]
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(60) == 0
    cluster.wait_for_isr(topic, 0, everyone)
    leader = cluster.leader(topic, 0)
    cluster.kill(leader)
    cluster.wait_for_leader(topic, 0, not_in=(leader,))
    consumer = Consumer({**client_conf, "group.id": f"{topic}-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == values  # every acknowledged record, from a follower that replicated it
    return leader


@pytest.fixture
def cluster(cluster_factory) -> Cluster:
    """Three brokers (ids 1, 2, 3) on the test's ZooKeeper chroot."""
    return cluster_factory(3)
