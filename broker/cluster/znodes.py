"""One small class per znode: its path and its JSON layout (Apache Kafka 2.x).

Every class has ``path(...)``, ``encode(...) -> bytes`` and ``decode(bytes)``,
and the layouts are Kafka's, so ZooKeeper tooling reads ours and we read theirs::

    /cluster/id                              {"version":"1","id":"<22 chars>"}
    /brokers/ids/<id>            (ephemeral) {"version":4,"host":h,"port":p,"jmx_port":-1,
                                              "timestamp":"<ms>","endpoints":["PLAINTEXT://h:p"],
                                              "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
                                              "rack":null}
    /brokers/topics/<t>                      {"version":2,"partitions":{"0":[0,1]},
                                              "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<t>/partitions/<p>/state {"version":1,"leader":0,"leader_epoch":0,
                                              "isr":[0],"controller_epoch":1}
    /config/topics/<t>                       {"version":1,"config":{"retention.ms":"1000"}}
    /controller                  (ephemeral) {"version":1,"brokerid":0,"timestamp":"<ms>"}
    /controller_epoch                        "1"  (a bare integer)
    /admin/delete_topics/<t>                 (empty)
    /latest_producer_id_block                {"version":1,"broker":0,"block_start":"0","block_end":"999"}

JSON is written compactly with sorted keys; decoders accept any field order and
ignore unknown fields.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field

from broker.config import Endpoint


def _dump(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def new_cluster_id() -> str:
    """22-character URL-safe base64 (no padding) of a random UUID, as Kafka makes it."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


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

    def endpoint(self, listener_name: str = "PLAINTEXT") -> Endpoint | None:
        for e in self.endpoints:
            if e.listener_name == listener_name:
                return e
        return self.endpoints[0] if self.endpoints else None


class BrokerIdZNode:
    @staticmethod
    def path(broker_id: int) -> str:
        return f"/brokers/ids/{broker_id}"

    @staticmethod
    def encode(reg: BrokerRegistration) -> bytes:
        first = reg.endpoint()
        return _dump(
            {
                "version": 4,
                "host": first.host if first else None,
                "port": first.port if first else -1,
                "jmx_port": -1,
                "timestamp": str(reg.timestamp_ms or int(time.time() * 1000)),
                "endpoints": [str(e) for e in reg.endpoints],
                "listener_security_protocol_map": {e.listener_name: "PLAINTEXT" for e in reg.endpoints},
                "rack": reg.rack,
            }
        )

    @staticmethod
    def decode(broker_id: int, data: bytes) -> BrokerRegistration:
        from broker.config import parse_endpoint

        doc = json.loads(data)
        endpoints = tuple(parse_endpoint(e) for e in doc.get("endpoints", []))
        if not endpoints and doc.get("host"):
            endpoints = (Endpoint("PLAINTEXT", doc["host"], int(doc["port"])),)
        return BrokerRegistration(broker_id, endpoints, doc.get("rack"), int(doc.get("timestamp", 0)))


class TopicZNode:
    """Replica assignment of a topic: partition -> replica broker ids (first is preferred leader)."""

    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}"

    @staticmethod
    def encode(assignment: dict[int, list[int]]) -> bytes:
        return _dump(
            {
                "version": 2,
                "partitions": {str(p): list(r) for p, r in sorted(assignment.items())},
                "adding_replicas": {},
                "removing_replicas": {},
            }
        )

    @staticmethod
    def decode(data: bytes) -> dict[int, list[int]]:
        doc = json.loads(data)
        return {int(p): [int(b) for b in r] for p, r in doc.get("partitions", {}).items()}


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
        return {k: str(v) for k, v in json.loads(data).get("config", {}).items()}


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
