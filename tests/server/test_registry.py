"""The API registry: one handler per key, ranges within the schemas, discovery of modules."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker.protocol import ApiKey, api_versions_table
from broker.server.registry import ApiRegistry, DuplicateApiError, load_apis

from .wire import Wire


async def _noop(ctx, request):
    return {}


def test_registering_a_key_twice_fails():
    registry = ApiRegistry()
    registry.register(ApiKey.METADATA, 0, 9, _noop)
    with pytest.raises(DuplicateApiError):
        registry.register(ApiKey.METADATA, 0, 1, _noop)
    with pytest.raises(DuplicateApiError):
        load_apis(registry)


def test_ranges_are_clipped_to_the_schema_and_unknown_keys_refused():
    registry = ApiRegistry()
    low, high = api_versions_table()[ApiKey.PRODUCE]
    registry.register(ApiKey.PRODUCE, 0, high + 10, _noop)
    assert registry.versions()[ApiKey.PRODUCE] == (low, high)
    with pytest.raises(ValueError):
        registry.register(9999, 0, 1, _noop)


def test_a_schema_without_a_handler_is_not_advertised():
    registry = ApiRegistry()
    registry.register(ApiKey.METADATA, 0, 9, _noop)
    assert registry.versions() == {ApiKey.METADATA: (0, 9)}
    assert ApiKey.LEADER_AND_ISR in api_versions_table() and ApiKey.LEADER_AND_ISR not in registry


def test_the_served_apis_and_their_ranges():
    versions = load_apis().versions()
    assert versions[ApiKey.API_VERSIONS] == (0, 3)
    assert versions[ApiKey.METADATA] == (0, 12)
    assert versions[ApiKey.LEADER_AND_ISR] == (0, 5) and versions[ApiKey.UPDATE_METADATA] == (0, 7)
    assert versions[ApiKey.PRODUCE] == (0, 11)
    assert versions[ApiKey.FETCH] == (0, 16)
    assert versions[ApiKey.LIST_OFFSETS] == (0, 7)
    assert versions[ApiKey.SASL_HANDSHAKE] == (0, 1)
    assert versions[ApiKey.INIT_PRODUCER_ID] == (0, 4)


def test_init_producer_id_hands_out_unique_ids_across_restarts(broker):
    body = {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    with Wire(broker.bootstrap) as w:
        first = [w.call(ApiKey.INIT_PRODUCER_ID, 4, body)["producer_id"] for _ in range(3)]
    broker.restart()
    with Wire(broker.bootstrap) as w:
        second = w.call(ApiKey.INIT_PRODUCER_ID, 0, body)["producer_id"]
    assert len(set(first)) == 3 and second not in first


def test_a_port_in_use_exits_1_with_one_line(broker, tmp_path):
    config = tmp_path / "clash.yaml"
    config.write_text(f"listeners: PLAINTEXT://127.0.0.1:{broker.port}\nlog.dirs: {tmp_path / 'd'}\n")
    proc = subprocess.run([sys.executable, "-m", "broker", "--config", str(config)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("broker: cannot start:")
