"""Admin APIs over the raw wire against a broker process: every version, and the cases clients hide."""

from __future__ import annotations

import time
import uuid

from broker.protocol import ApiKey, ErrorCode

from .wire import Wire, make_batch

CT, DT, CP = ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS
DC, AC, IAC = ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS
DR, CL, LD = ApiKey.DELETE_RECORDS, ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_LOG_DIRS
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


def new_topic(name, partitions=1, factor=1, configs=None, assignments=None) -> dict:
    return {"name": name, "num_partitions": partitions, "replication_factor": factor,
            "assignments": [{"partition_index": p, "broker_ids": b} for p, b in (assignments or {}).items()],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


def create(w: Wire, *topics, version=5, timeout_ms=10000, validate_only=False) -> list[dict]:
    body = {"topics": list(topics), "timeout_ms": timeout_ms, "validate_only": validate_only}
    return w.call(CT, version, body)["topics"]


def describe(w: Wire, rtype, name, keys=None, version=3, synonyms=False, documentation=False) -> dict:
    body = {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": synonyms, "include_documentation": documentation}
    (result,) = w.call(DC, version, body)["results"]
    return result


def topic_names(w: Wire) -> set[str]:
    body = {"topics": None, "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}
    return {t["name"] for t in w.call(ApiKey.METADATA, 9, body)["topics"]}


def test_every_version_of_every_admin_api(broker):
    with Wire(broker.bootstrap) as w:
        for v in range(8):
            (r,) = create(w, new_topic(f"v{v}", 2, configs={"retention.ms": "1000"}), version=v)
            assert r["error_code"] == 0, (v, r)
            if v >= 5:
                assert (r["num_partitions"], r["replication_factor"]) == (2, 1)
                configs = {c["name"]: c for c in r["configs"]}
                assert configs["retention.ms"]["value"] == "1000" and configs["retention.ms"]["config_source"] == 1
        for v in range(5):
            r = describe(w, TOPIC, "v0", ["retention.ms", "segment.bytes"], version=v)
            entries = {c["name"]: c for c in r["configs"]}
            assert set(entries) == {"retention.ms", "segment.bytes"} and entries["retention.ms"]["value"] == "1000"
            if v == 0:
                assert not entries["retention.ms"]["is_default"] and entries["segment.bytes"]["is_default"]
            else:
                assert (entries["retention.ms"]["config_source"], entries["segment.bytes"]["config_source"]) == (1, 5)
        for v in range(3):
            body = {"resources": [{"resource_type": TOPIC, "resource_name": "v1",
                                   "configs": [{"name": "segment.bytes", "value": str(10000 + v)}]}],
                    "validate_only": False}
            assert w.call(AC, v, body)["responses"][0]["error_code"] == 0
        for v in range(2):
            body = {"resources": [{"resource_type": TOPIC, "resource_name": "v1", "configs": [
                {"name": "retention.ms", "config_operation": 0, "value": str(5000 + v)}]}], "validate_only": False}
            assert w.call(IAC, v, body)["responses"][0]["error_code"] == 0
        values = {c["name"]: c["value"] for c in describe(w, TOPIC, "v1", ["retention.ms", "segment.bytes"])["configs"]}
        assert values == {"retention.ms": "5001", "segment.bytes": "10002"}
        for v in range(4):
            body = {"topics": [{"name": f"v{v}", "count": 3, "assignments": None}], "timeout_ms": 5000,
                    "validate_only": False}
            assert w.call(CP, v, body)["results"][0]["error_code"] == 0
        for v in range(3):
            w.call(ApiKey.PRODUCE, 8, {"acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": "v2", "partition_data": [{"index": 0, "records": make_batch([b"a", b"b", b"c"])}]}]})
            body = {"topics": [{"name": "v2", "partitions": [{"partition_index": 0, "offset": v + 1}]}],
                    "timeout_ms": 5000}
            (p,) = w.call(DR, v, body)["topics"][0]["partitions"]
            assert (p["error_code"], p["low_watermark"]) == (0, v + 1)
        for v in range(2):
            r = w.call(CL, v, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
            assert r["error_code"] == 0 and r["controller_id"] == 0 and len(r["cluster_id"]) == 22
            assert [b["broker_id"] for b in r["brokers"]] == [0]
            assert r["cluster_authorized_operations"] == -(2**31)
        for v in range(5):
            r = w.call(LD, v, {"topics": [{"topic": "v2", "partitions": [0, 1, 9]}]})
            (d,) = r["results"]
            assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in d["topics"]] == [
                ("v2", [0, 1])]
            if v >= 4:
                assert d["total_bytes"] > 0 and d["usable_bytes"] >= 0
        for v in range(7):
            body = ({"topics": [{"name": f"v{v}", "topic_id": uuid.UUID(int=0)}], "timeout_ms": 5000} if v >= 6
                    else {"topic_names": [f"v{v}"], "timeout_ms": 5000})
            (r,) = w.call(DT, v, body)["responses"]
            assert (r["name"], r["error_code"]) == (f"v{v}", 0)
        assert {n for n in topic_names(w) if n.startswith("v")} == {"v7"}


def test_create_topics_edge_cases(broker):
    with Wire(broker.bootstrap) as w:
        twice = create(w, new_topic("dup"), new_topic("dup"), new_topic("single"))
        assert [(r["name"], r["error_code"]) for r in twice] == [("dup", ErrorCode.INVALID_REQUEST), ("single", 0)]
        (r,) = create(w, new_topic("late"), timeout_ms=0)
        assert r["error_code"] == ErrorCode.REQUEST_TIMED_OUT
        # created all the same, as Kafka does: the controller makes it a moment later
        deadline = time.monotonic() + 30  # a guard against a hang, not a timing assertion
        while "late" not in topic_names(w) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "late" in topic_names(w)
        (r,) = create(w, new_topic("both", 2, assignments={0: [0]}))
        assert r["error_code"] == ErrorCode.INVALID_REQUEST
        (r,) = create(w, new_topic("manual", -1, -1, assignments={0: [0], 1: [0]}))
        assert (r["error_code"], r["num_partitions"], r["replication_factor"]) == (0, 2, 1)
        (r,) = create(w, new_topic("elsewhere", -1, -1, assignments={0: [5]}))
        assert r["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        (r,) = create(w, {**new_topic("nullcfg"), "configs": [{"name": "retention.ms", "value": None}]})
        assert r["error_code"] == ErrorCode.INVALID_REQUEST
        (r,) = create(w, new_topic("zero", 0))
        assert r["error_code"] == ErrorCode.INVALID_PARTITIONS
        (r,) = create(w, new_topic("nofactor", 1, 0))
        assert r["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
        (r,) = create(w, new_topic("x" * 250))
        assert r["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION and "249" in r["error_message"]
        (r,) = create(w, new_topic("dry", 4, configs={"segment.bytes": "4096"}), validate_only=True)
        assert (r["error_code"], r["num_partitions"]) == (0, 4)
        assert {c["name"]: c["value"] for c in r["configs"]}["segment.bytes"] == "4096"
        assert "dry" not in topic_names(w)


def test_describe_configs_details(broker):
    with Wire(broker.bootstrap) as w:
        create(w, new_topic("docs"))
        r = describe(w, TOPIC, "docs", ["cleanup.policy", "no.such.config"], synonyms=True, documentation=True)
        (entry,) = r["configs"]
        assert entry["name"] == "cleanup.policy" and entry["config_type"] == 7  # LIST
        assert entry["documentation"] and entry["synonyms"] == [
            {"name": "log.cleanup.policy", "value": "delete", "source": 5}]
        assert describe(w, TOPIC, "docs", ["segment.bytes"])["configs"][0]["documentation"] is None
        assert describe(w, TOPIC, "bad/name")["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert describe(w, BROKER, "7")["error_code"] == ErrorCode.INVALID_REQUEST
        assert describe(w, BROKER_LOGGER, "0")["error_code"] == ErrorCode.INVALID_REQUEST
        empty = describe(w, BROKER, "")
        assert (empty["error_code"], empty["configs"]) == (0, [])  # no dynamic cluster defaults
        (listeners,) = describe(w, BROKER, "0", ["listeners"])["configs"]
        assert listeners["read_only"] and listeners["config_source"] == 4 and listeners["value"].startswith("PLAINTEXT://")


def test_alter_configs_errors(broker):
    with Wire(broker.bootstrap) as w:
        create(w, new_topic("cfg"))
        resource = {"resource_type": TOPIC, "resource_name": "cfg", "configs": [
            {"name": "cleanup.policy", "config_operation": 2, "value": "compact"},
            {"name": "cleanup.policy", "config_operation": 3, "value": "delete"}]}
        (r,) = w.call(IAC, 1, {"resources": [resource], "validate_only": False})["responses"]
        assert r["error_code"] == ErrorCode.INVALID_REQUEST and "cleanup.policy" in r["error_message"]
        resource["configs"] = [{"name": "segment.bytes", "config_operation": 9, "value": "1"}]
        (r,) = w.call(IAC, 1, {"resources": [resource], "validate_only": False})["responses"]
        assert r["error_code"] == ErrorCode.INVALID_REQUEST
        resource["configs"] = [{"name": "segment.bytes", "config_operation": 1, "value": None}]
        twice = w.call(IAC, 1, {"resources": [resource, resource], "validate_only": False})["responses"]
        assert [r["error_code"] for r in twice] == [ErrorCode.INVALID_REQUEST] * 2
        missing = {"resource_type": TOPIC, "resource_name": "missing", "configs": []}
        (r,) = w.call(AC, 1, {"resources": [missing], "validate_only": False})["responses"]
        assert r["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        null = {"resource_type": TOPIC, "resource_name": "cfg", "configs": [{"name": "retention.ms", "value": None}]}
        (r,) = w.call(AC, 1, {"resources": [null], "validate_only": False})["responses"]
        assert r["error_code"] == ErrorCode.INVALID_REQUEST


def test_delete_topics_by_id_and_disabled(broker_factory):
    broker = broker_factory(delete_topic_enable=False)
    with Wire(broker.bootstrap) as w:
        create(w, new_topic("kept"))
        (r,) = w.call(DT, 6, {"topics": [{"name": None, "topic_id": uuid.uuid4()}], "timeout_ms": 5000})["responses"]
        assert r["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
        (r,) = w.call(DT, 2, {"topic_names": ["kept"], "timeout_ms": 5000})["responses"]
        assert r["error_code"] == ErrorCode.INVALID_REQUEST
        (r,) = w.call(DT, 5, {"topic_names": ["kept"], "timeout_ms": 5000})["responses"]
        assert r["error_code"] == ErrorCode.TOPIC_DELETION_DISABLED and r["error_message"]
        assert "kept" in topic_names(w)


def test_delete_records_and_describe_cluster_errors(broker):
    with Wire(broker.bootstrap) as w:
        create(w, new_topic("dr"))
        body = {"topics": [{"name": "dr", "partitions": [{"partition_index": 0, "offset": -5},
                                                         {"partition_index": 0, "offset": 1},
                                                         {"partition_index": 3, "offset": 0}]},
                           {"name": "nope", "partitions": [{"partition_index": 0, "offset": 0}]}],
                "timeout_ms": 5000}
        topics = w.call(DR, 1, body)["topics"]
        assert [(p["error_code"], p["low_watermark"]) for t in topics for p in t["partitions"]] == [
            (ErrorCode.OFFSET_OUT_OF_RANGE, -1), (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
            (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1), (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]
        r = w.call(CL, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 2})
        assert r["error_code"] == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE and r["brokers"] == []
        r = w.call(CL, 0, {"include_cluster_authorized_operations": True})
        assert r["cluster_authorized_operations"] == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
