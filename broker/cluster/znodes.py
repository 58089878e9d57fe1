"""One small class per znode: its path and its JSON layout (Apache Kafka 2.7).

Every class has ``path(...)``, ``encode(...) -> bytes`` and ``decode(bytes)``,
and the layouts are those Kafka 2.7 writes (its ``ZkData``), so ZooKeeper
tooling reads ours and we read theirs::

    /cluster/id                              {"version":"1","id":"<22 chars>"}
    /brokers/ids/<id>            (ephemeral) {"version":5,"host":h,"port":p,"jmx_port":-1,
                                              "timestamp":"<ms>","endpoints":["PLAINTEXT://h:p"],
                                              "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
                                              "rack":"r1","features":{}}   (rack only when set)
    /brokers/seqid                           (empty; its version numbers generated broker ids)
    /brokers/topics/<t>                      {"version":3,"topic_id":"<22 chars>","partitions":{"0":[0,1]},
                                              "adding_replicas":{},"removing_replicas":{}}
                                             (Kafka 2.8's layout, KIP-516; a version-2 node, written by
                                              Kafka 2.7 or older tools, has no topic_id: the controller
                                              gives the topic one)
                                             (during a reassignment (KIP-455) a partition's replicas
                                              are ORS + TRS, adding TRS - ORS, removing ORS - TRS)
    /brokers/topics/<t>/partitions/<p>/state {"version":1,"leader":0,"leader_epoch":0,
                                              "isr":[0],"controller_epoch":1}
    /config/topics/<t>                       {"version":1,"config":{"retention.ms":"1000"}}
    /config/brokers/<id> and /config/brokers/<default>
                                             {"version":1,"config":{"leader.replication.throttled.rate":"1000"}}
                                             (dynamic broker configs, KIP-226: one broker's, every broker's)
    /config/users/<user>                     {"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,
                                              server_key=...,iterations=4096"}}  (SCRAM credentials; the
                                              name URL-encoded as Kafka's Sanitizer does)
    /config/groups/<group>                   {"version":1,"config":{"share.auto.offset.reset":"earliest"}}
                                             (group configs, Kafka 4.1's GROUP config resource; the
                                              group id URL-encoded as Kafka's Sanitizer does; the node
                                              goes when its last override is deleted)
    /config/client-metrics/<name>            {"version":1,"config":{"metrics":"org.apache.kafka.producer.",
                                              "interval.ms":"60000"}}  (client metrics subscriptions,
                                              KIP-714; the node goes with its last config)
    /config/changes/config_change_<10 digits> {"version":2,"entity_path":"topics/<t>"}  (sequential;
                                              "brokers/<id>" or "brokers/<default>" for broker configs,
                                              "users/<user>" for users, "groups/<group>" for groups,
                                              "client-metrics/<name>" for subscriptions)
    /controller                  (ephemeral) {"version":1,"brokerid":0,"timestamp":"<ms>"}
    /controller_epoch                        "1"  (a bare integer; made as "0", bumped by every election)
    /admin/delete_topics/<t>                 (empty)
    /admin/reassign_partitions               {"version":1,"partitions":[{"topic":t,"partition":0,
                                              "replicas":[1,2]}]}  (old tools' reassignment request)
    /isr_change_notification/isr_change_<10 digits>
                                             {"version":1,"partitions":[{"topic":t,"partition":0}]}  (sequential)
    /latest_producer_id_block                {"version":1,"broker":0,"block_start":"0","block_end":"999"}
                                             (empty until the first block is handed out)

:data:`PERSISTENT_PATHS` are the nodes Kafka makes at every broker start.
JSON is written compactly with sorted keys; decoders accept any field order and
ignore unknown fields.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

from broker.config import Endpoint
from broker.topic_ids import format_topic_id, parse_topic_id


#: Made (empty) at every start when missing, as Kafka's ``ZkData.PersistentZkPaths``.
PERSISTENT_PATHS = (
    "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
    "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block",
    "/log_dir_event_notification", "/config/topics", "/config/clients", "/config/users", "/config/brokers",
)


def _dump(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def new_cluster_id() -> str:
    """22-character URL-safe base64 (no padding) of a random UUID, as Kafka makes it."""
    return format_topic_id(uuid.uuid4())


class ClusterIdZNode:
    @staticmethod
    def path() -> str:
        return "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dump({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return json.loads(data)["id"]


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """What a broker announces in ``/brokers/ids/<id>``."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    timestamp_ms: int = 0
    #: the czxid of the znode (Kafka's broker epoch, KIP-380), when read from the store; never written in it
    broker_epoch: int = field(default=-1, compare=False)
    #: ``((listener name, security protocol), ...)``; a listener not named here is PLAINTEXT
    protocols: tuple[tuple[str, str], ...] = ()

    def listener(self, listener_name: str) -> Endpoint | None:
        """The listener named ``listener_name``, or None when this broker has none of that name."""
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)

    def security_protocol(self, listener_name: str) -> str:
        return dict(self.protocols).get(listener_name, "PLAINTEXT")

    def endpoint(self, listener_name: str = "PLAINTEXT") -> Endpoint | None:
        """The listener named ``listener_name``, else the first one, else None."""
        return self.listener(listener_name) or (self.endpoints[0] if self.endpoints else None)


class BrokerIdZNode:
    @staticmethod
    def path(broker_id: int) -> str:
        return f"/brokers/ids/{broker_id}"

    @staticmethod
    def encode(reg: BrokerRegistration) -> bytes:
        # host and port are the first endpoint's whose protocol is PLAINTEXT, for readers older than endpoints
        # (Kafka's rule: -1 and null when there is none)
        plaintext = next((e for e in reg.endpoints if reg.security_protocol(e.listener_name) == "PLAINTEXT"), None)
        doc = {
            "version": 5,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "jmx_port": -1,
            "timestamp": str(reg.timestamp_ms or int(time.time() * 1000)),
            "endpoints": [str(e) for e in reg.endpoints],
            "listener_security_protocol_map": {e.listener_name: reg.security_protocol(e.listener_name)
                                               for e in reg.endpoints},
            "features": {},
        }
        if reg.rack is not None:
            doc["rack"] = reg.rack
        return _dump(doc)

    @staticmethod
    def decode(broker_id: int, data: bytes) -> BrokerRegistration:
        from broker.config import parse_endpoint

        doc = json.loads(data)
        endpoints = tuple(parse_endpoint(e) for e in doc.get("endpoints", []))
        if not endpoints and doc.get("host"):
            endpoints = (Endpoint("PLAINTEXT", doc["host"], int(doc["port"])),)
        protocols = tuple(sorted((str(k), str(v)) for k, v in (doc.get("listener_security_protocol_map") or {}).items()))
        return BrokerRegistration(broker_id, endpoints, doc.get("rack"), int(doc.get("timestamp", 0)),
                                  protocols=protocols)


class BrokerSequenceIdZNode:
    """Its data stays empty: every write bumps its version, which numbers generated broker ids."""

    @staticmethod
    def path() -> str:
        return "/brokers/seqid"


class TopicZNode:
    """Replica assignment of a topic: partition -> replica broker ids (first is preferred leader).

    ``adding`` and ``removing`` name, per partition being reassigned, the
    replicas it gains and loses (partitions not being reassigned are absent).
    ``topic_id`` (KIP-516) is written as Kafka 2.8 writes it, in a version-3
    node; without one the node is Kafka 2.7's version 2.
    """

    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}"

    @staticmethod
    def encode(assignment: dict[int, list[int]], adding: dict[int, list[int]] | None = None,
               removing: dict[int, list[int]] | None = None, topic_id: uuid.UUID | None = None) -> bytes:
        doc = {
            "version": 2 if topic_id is None else 3,
            "partitions": {str(p): list(r) for p, r in sorted(assignment.items())},
            "adding_replicas": {str(p): list(r) for p, r in sorted((adding or {}).items()) if r},
            "removing_replicas": {str(p): list(r) for p, r in sorted((removing or {}).items()) if r},
        }
        if topic_id is not None:
            doc["topic_id"] = format_topic_id(topic_id)
        return _dump(doc)

    @staticmethod
    def decode(data: bytes) -> dict[int, list[int]]:
        doc = json.loads(data)
        return {int(p): [int(b) for b in r] for p, r in doc.get("partitions", {}).items()}

    @staticmethod
    def decode_topic_id(data: bytes) -> uuid.UUID | None:
        """The topic's id, or None for a node without one (Kafka 2.7 and older, or an unreadable id)."""
        text = json.loads(data).get("topic_id")
        if text is None:
            return None
        try:
            return parse_topic_id(text)
        except ValueError:
            return None

    @staticmethod
    def decode_reassignment(data: bytes) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
        """``(adding, removing)``: the replicas of partitions being reassigned (Kafka 2.4+ layouts)."""
        doc = json.loads(data)

        def lists(key: str) -> dict[int, list[int]]:
            return {int(p): [int(b) for b in r] for p, r in (doc.get(key) or {}).items() if r}
        return lists("adding_replicas"), lists("removing_replicas")


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}/partitions"


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leadership of one partition: the leader, its epoch and the in-sync replicas."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 1
    version: int = field(default=-1, compare=False)  # the znode version it was read at


class TopicPartitionStateZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}/state"

    @staticmethod
    def encode(state: PartitionState) -> bytes:
        return _dump(
            {
                "version": 1,
                "leader": state.leader,
                "leader_epoch": state.leader_epoch,
                "isr": list(state.isr),
                "controller_epoch": state.controller_epoch,
            }
        )

    @staticmethod
    def decode(data: bytes, version: int = -1) -> PartitionState:
        doc = json.loads(data)
        return PartitionState(
            int(doc["leader"]),
            int(doc["leader_epoch"]),
            tuple(int(b) for b in doc["isr"]),
            int(doc.get("controller_epoch", 0)),
            version,
        )


class TopicConfigZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/config/topics/{topic}"

    @staticmethod
    def encode(config: dict[str, str]) -> bytes:
        return _dump({"version": 1, "config": {k: str(v) for k, v in config.items()}})

    @staticmethod
    def decode(data: bytes) -> dict[str, str]:
        # a node made as the parent of another (a user's node above its client ids) holds nothing
        return {k: str(v) for k, v in json.loads(data).get("config", {}).items()} if data else {}


class BrokerConfigZNode:
    """Dynamic configs of one broker (``<id>``) or of every broker (:data:`DEFAULT`); the topic config layout."""

    DEFAULT = "<default>"

    @staticmethod
    def path(entity: str) -> str:
        return f"/config/brokers/{entity}"

    encode = staticmethod(TopicConfigZNode.encode)
    decode = staticmethod(TopicConfigZNode.decode)


class UserConfigZNode:
    """Configs of one user, ``/config/users/<sanitized name>`` (:func:`broker.sasl.sanitize_user`): its SCRAM
    credentials (``SCRAM-SHA-256`` -> Kafka's credential text), the topic config layout."""

    @staticmethod
    def root() -> str:
        return "/config/users"

    @staticmethod
    def path(sanitized: str) -> str:
        return f"/config/users/{sanitized}"

    encode = staticmethod(TopicConfigZNode.encode)
    decode = staticmethod(TopicConfigZNode.decode)


class GroupConfigZNode:
    """Configs of one group, ``/config/groups/<sanitized group id>`` (URL-encoded as Kafka's Sanitizer does, as
    for users), the topic config layout."""

    @staticmethod
    def root() -> str:
        return "/config/groups"

    @staticmethod
    def path(sanitized: str) -> str:
        return f"/config/groups/{sanitized}"

    encode = staticmethod(TopicConfigZNode.encode)
    decode = staticmethod(TopicConfigZNode.decode)


class ClientMetricsZNode:
    """One client metrics subscription (KIP-714's CLIENT_METRICS config resource),
    ``/config/client-metrics/<sanitized name>`` (Kafka's ConfigType ``client-metrics``; the name URL-encoded as
    Kafka's Sanitizer does), the topic config layout."""

    @staticmethod
    def root() -> str:
        return "/config/client-metrics"

    @staticmethod
    def path(sanitized: str) -> str:
        return f"/config/client-metrics/{sanitized}"

    encode = staticmethod(TopicConfigZNode.encode)
    decode = staticmethod(TopicConfigZNode.decode)


class ConfigChangeNotificationZNode:
    """A sequential node telling every broker that an entity's config changed."""

    PREFIX = "config_change_"

    @staticmethod
    def path() -> str:
        return "/config/changes"

    @classmethod
    def create_path(cls) -> str:
        return f"/config/changes/{cls.PREFIX}"

    @staticmethod
    def encode_topic(topic: str) -> bytes:
        return _dump({"version": 2, "entity_path": f"topics/{topic}"})

    @staticmethod
    def encode_broker(entity: str) -> bytes:
        return _dump({"version": 2, "entity_path": f"brokers/{entity}"})

    @staticmethod
    def encode_user(sanitized: str) -> bytes:
        return _dump({"version": 2, "entity_path": f"users/{sanitized}"})

    @staticmethod
    def encode_entity(path: str) -> bytes:
        """Any entity by its path under /config (``users/alice/clients/app``, ``clients/app``)."""
        return _dump({"version": 2, "entity_path": path})

    @staticmethod
    def decode(data: bytes) -> str:
        """The changed entity as ``type/name`` (``topics/orders``)."""
        return json.loads(data)["entity_path"]


class ControllerZNode:
    @staticmethod
    def path() -> str:
        return "/controller"

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(int(time.time() * 1000))})

    @staticmethod
    def decode(data: bytes) -> int:
        return int(json.loads(data)["brokerid"])


class ControllerEpochZNode:
    @staticmethod
    def path() -> str:
        return "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    def decode(data: bytes) -> int:
        return int(data.decode())


class DeleteTopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/admin/delete_topics/{topic}"


class ReassignPartitionsZNode:
    """Old tools' reassignment request: ``{(topic, partition): target replicas}``.

    The controller starts each move it names and takes the partition out of
    the node when its move completes; the node goes when it is empty.
    """

    @staticmethod
    def path() -> str:
        return "/admin/reassign_partitions"

    @staticmethod
    def encode(targets: dict[tuple[str, int], list[int]]) -> bytes:
        return _dump({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                                   for (t, p), r in sorted(targets.items())]})

    @staticmethod
    def decode(data: bytes) -> dict[tuple[str, int], list[int]]:
        doc = json.loads(data)
        return {(e["topic"], int(e["partition"])): [int(b) for b in e["replicas"]] for e in doc.get("partitions", [])}


class IsrChangeNotificationZNode:
    """A sequential node telling the controller that leaders changed these partitions' ISR."""

    PREFIX = "isr_change_"

    @staticmethod
    def path() -> str:
        return "/isr_change_notification"

    @classmethod
    def create_path(cls) -> str:
        return f"/isr_change_notification/{cls.PREFIX}"

    @staticmethod
    def encode(partitions: list[tuple[str, int]]) -> bytes:
        return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    @staticmethod
    def decode(data: bytes) -> list[tuple[str, int]]:
        return [(e["topic"], int(e["partition"])) for e in json.loads(data).get("partitions", [])]


class LogDirEventNotificationZNode:
    """A sequential node telling the controller that a broker's log dir failed (Kafka's event 1)."""

    PREFIX = "log_dir_event_"
    LOG_DIR_FAILURE = 1

    @staticmethod
    def path() -> str:
        return "/log_dir_event_notification"

    @classmethod
    def create_path(cls) -> str:
        return f"/log_dir_event_notification/{cls.PREFIX}"

    @classmethod
    def encode(cls, broker_id: int) -> bytes:
        return _dump({"version": 1, "broker": broker_id, "event": cls.LOG_DIR_FAILURE})

    @staticmethod
    def decode(data: bytes) -> tuple[int, int]:
        """(broker id, event)."""
        found = json.loads(data)
        return int(found["broker"]), int(found["event"])


class ProducerIdBlockZNode:
    """The last block of producer ids handed out: ``(broker, block_start, block_end)`` inclusive."""

    @staticmethod
    def path() -> str:
        return "/latest_producer_id_block"

    @staticmethod
    def encode(broker_id: int, block_start: int, block_end: int) -> bytes:
        return _dump({"version": 1, "broker": broker_id, "block_start": str(block_start),
                      "block_end": str(block_end)})

    @staticmethod
    def decode(data: bytes) -> tuple[int, int, int]:
        doc = json.loads(data)
        return int(doc["broker"]), int(doc["block_start"]), int(doc["block_end"])
