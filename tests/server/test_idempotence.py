"""The idempotent producer's checks, answered with Kafka's codes, and the producer state across restarts.

Hand-built Produce requests (exact sequences and epochs) against a broker
process; the state is checked through what the broker answers to a retried
batch (the first write's offset) and what a consumer reads (each record once).
"""

from __future__ import annotations

import time

from broker.log.producer_state import decode_snapshot, list_snapshots, snapshot_file_name
from broker.protocol import ApiKey
from broker.records import BatchBuilder, iter_records
from broker.records.control import ControlRecordType, EndTransactionMarker, build_end_txn_marker_batch

from .test_api import fetch, produce
from .wire import Wire

INT32_MAX = (1 << 31) - 1


def batch(producer_id: int, epoch: int, sequence: int, values: list[bytes], transactional: bool = False) -> bytes:
    b = BatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                     is_transactional=transactional)
    for i, value in enumerate(values):
        b.append(int(time.time() * 1000), None, value)  # now: producers idle for 7 days expire
    return b.build()


def init_producer_id(w: Wire) -> tuple[int, int]:
    r = w.call(ApiKey.INIT_PRODUCER_ID, 2, {"transactional_id": None, "transaction_timeout_ms": 60000})
    assert r["error_code"] == 0
    return r["producer_id"], r["producer_epoch"]


def values_of(w: Wire, topic: str) -> list[bytes]:
    out, offset = [], 0
    while True:
        p = fetch(w, topic, offset)
        assert p["error_code"] == 0
        entries = [e for e in iter_records(p["records"]) if e.offset >= offset]
        if not entries:
            return out
        out += [e.value for e in entries]
        offset = entries[-1].offset + 1


def test_duplicate_gap_and_old_epoch_get_kafkas_answers(broker):
    with Wire(broker.bootstrap) as w:
        pid, epoch = init_producer_id(w)
        first = produce(w, "idem", batch(pid, epoch, 0, [b"a", b"b", b"c"]))
        assert (first["error_code"], first["base_offset"]) == (0, 0)
        assert produce(w, "idem", batch(pid, epoch, 3, [b"d", b"e"]))["base_offset"] == 3
        # a retry of either batch is a success with the first write's offset, and writes nothing
        again = produce(w, "idem", batch(pid, epoch, 0, [b"a", b"b", b"c"]))
        assert (again["error_code"], again["base_offset"]) == (0, 0)
        assert produce(w, "idem", batch(pid, epoch, 3, [b"d", b"e"]))["base_offset"] == 3
        gap = produce(w, "idem", batch(pid, epoch, 7, [b"x"]))
        assert gap["error_code"] == 45 and "out of order" in gap["error_message"]  # OUT_OF_ORDER_SEQUENCE_NUMBER
        # a new epoch must start at sequence 0; after it, the old epoch is fenced
        assert produce(w, "idem", batch(pid, epoch + 1, 4, [b"x"]))["error_code"] == 45
        assert produce(w, "idem", batch(pid, epoch + 1, 0, [b"f"]))["base_offset"] == 5
        old = produce(w, "idem", batch(pid, epoch, 5, [b"x"]))
        assert old["error_code"] == 47  # INVALID_PRODUCER_EPOCH
        assert values_of(w, "idem") == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_only_the_last_five_batches_are_recognised_as_duplicates(broker):
    with Wire(broker.bootstrap) as w:
        pid, epoch = init_producer_id(w)
        for seq in range(6):
            assert produce(w, "five", batch(pid, epoch, seq, [b"v%d" % seq]))["base_offset"] == seq
        for seq in range(1, 6):  # the last five: answered with their offsets
            r = produce(w, "five", batch(pid, epoch, seq, [b"v%d" % seq]))
            assert (r["error_code"], r["base_offset"]) == (0, seq)
        assert produce(w, "five", batch(pid, epoch, 0, [b"v0"]))["error_code"] == 45  # out of the window
        assert values_of(w, "five") == [b"v%d" % i for i in range(6)]


def test_sequence_wraps_after_int32_max(broker):
    with Wire(broker.bootstrap) as w:
        pid, epoch = init_producer_id(w)
        # a producer the partition does not know may start anywhere (Kafka 2.5+)
        assert produce(w, "wrap", batch(pid, epoch, INT32_MAX - 1, [b"a", b"b"]))["error_code"] == 0
        assert produce(w, "wrap", batch(pid, epoch, 1, [b"x"]))["error_code"] == 45
        assert produce(w, "wrap", batch(pid, epoch, 0, [b"c", b"d"]))["base_offset"] == 2
        assert produce(w, "wrap", batch(pid, epoch, 0, [b"c", b"d"]))["base_offset"] == 2  # duplicate
        assert produce(w, "wrap", batch(pid, epoch, 2, [b"e"]))["base_offset"] == 4
        # a batch whose sequences wrap inside it
        pid2, _ = init_producer_id(w)
        assert produce(w, "wrap", batch(pid2, 0, INT32_MAX, [b"f", b"g"]))["base_offset"] == 5
        assert produce(w, "wrap", batch(pid2, 0, INT32_MAX, [b"f", b"g"]))["base_offset"] == 5
        assert produce(w, "wrap", batch(pid2, 0, 1, [b"h"]))["base_offset"] == 7
        assert values_of(w, "wrap") == [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h"]


def test_clients_may_not_write_control_batches_or_unsequenced_idempotent_batches(broker):
    with Wire(broker.bootstrap) as w:
        pid, epoch = init_producer_id(w)
        marker = build_end_txn_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 0), pid, epoch,
                                            1_700_000_000_000)
        r = produce(w, "ctl", marker)
        assert r["error_code"] == 87 and "control records" in r["error_message"]  # INVALID_RECORD
        r = produce(w, "ctl", batch(pid, epoch, -1, [b"x"]))
        assert r["error_code"] == 87 and "sequence" in r["error_message"]


def test_transactional_producer_may_not_write_outside_its_transaction(broker):
    with Wire(broker.bootstrap) as w:
        pid, epoch = init_producer_id(w)
        assert produce(w, "txnstate", batch(pid, epoch, 0, [b"t"], transactional=True))["error_code"] == 0
        assert produce(w, "txnstate", batch(pid, epoch, 1, [b"n"]))["error_code"] == 48  # INVALID_TXN_STATE


def _produce_six(w: Wire, topic: str) -> tuple[int, int]:
    pid, epoch = init_producer_id(w)
    for seq in range(0, 6, 2):
        assert produce(w, topic, batch(pid, epoch, seq, [b"v%d" % seq, b"v%d" % (seq + 1)]))["error_code"] == 0
    return pid, epoch


def _assert_state_kept(broker, topic: str, pid: int, epoch: int) -> None:
    """The last batch is still known (its retry is answered with its offset), the next one follows it."""
    with Wire(broker.bootstrap) as w:
        retry = produce(w, topic, batch(pid, epoch, 4, [b"v4", b"v5"]))
        assert (retry["error_code"], retry["base_offset"]) == (0, 4)
        assert produce(w, topic, batch(pid, epoch, 7, [b"x"]))["error_code"] == 45
        assert produce(w, topic, batch(pid, epoch, 6, [b"v6"]))["base_offset"] == 6
        assert values_of(w, topic) == [b"v%d" % i for i in range(7)]


def test_producer_state_survives_a_clean_restart_in_a_snapshot(broker):
    with Wire(broker.bootstrap) as w:
        pid, epoch = _produce_six(w, "snap")
    assert broker.stop() == 0
    pdir = broker.data_dir / "snap-0"
    assert list_snapshots(pdir)[-1] == 6
    entries = decode_snapshot((pdir / snapshot_file_name(6)).read_bytes())
    [entry] = [e for e in entries if e.producer_id == pid]
    assert (entry.producer_epoch, entry.last_seq, entry.batches[-1].first_offset) == (epoch, 5, 4)
    broker.start()
    _assert_state_kept(broker, "snap", pid, epoch)


def test_producer_state_is_rebuilt_from_the_log_after_sigkill(broker):
    with Wire(broker.bootstrap) as w:
        pid, epoch = _produce_six(w, "killed")
    broker.kill()
    broker.start()
    _assert_state_kept(broker, "killed", pid, epoch)


def test_a_flipped_or_deleted_snapshot_is_rebuilt_never_trusted(broker):
    with Wire(broker.bootstrap) as w:
        pid, epoch = _produce_six(w, "flip")
    assert broker.stop() == 0
    path = broker.data_dir / "flip-0" / snapshot_file_name(6)
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF  # inside the producer's entry: only the CRC tells
    path.write_bytes(bytes(data))
    broker.start()
    assert "producer snapshot" in broker.stderr_text() and "CRC" in broker.stderr_text()
    _assert_state_kept(broker, "flip", pid, epoch)
    assert broker.stop() == 0
    for offset in list_snapshots(path.parent):
        (path.parent / snapshot_file_name(offset)).unlink()
    broker.start()
    with Wire(broker.bootstrap) as w:  # rebuilt again: the retry of the last batch is recognised
        retry = produce(w, "flip", batch(pid, epoch, 6, [b"v6"]))
        assert (retry["error_code"], retry["base_offset"]) == (0, 6)
    assert broker.stop() == 0
    assert pid in {e.producer_id for e in decode_snapshot((path.parent / snapshot_file_name(7)).read_bytes())}


def test_an_idle_producer_expires_after_producer_id_expiration_ms(broker_factory):
    b = broker_factory({"producer.id.expiration.ms": 1000, "producer.id.expiration.check.interval.ms": 100})
    with Wire(b.bootstrap) as w:
        pid, epoch = init_producer_id(w)
        assert produce(w, "expiry", batch(pid, epoch, 0, [b"a"]))["error_code"] == 0
        assert produce(w, "expiry", batch(pid, epoch, 5, [b"x"]))["error_code"] == 45  # still known
        deadline = time.monotonic() + 30
        while True:  # forgotten once idle for a second: any sequence is taken again (Kafka 2.5+)
            r = produce(w, "expiry", batch(pid, epoch, 5, [b"b"]))
            if r["error_code"] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert r["error_code"] == 0
        assert values_of(w, "expiry") == [b"a", b"b"]


def test_producer_ids_are_never_handed_out_twice_across_restarts(broker):
    with Wire(broker.bootstrap) as w:
        first = [init_producer_id(w)[0] for _ in range(3)]
    assert first == sorted(set(first))
    broker.kill()  # the block claimed before the kill is never reused
    broker.start()
    with Wire(broker.bootstrap) as w:
        second = init_producer_id(w)[0]
    assert second > max(first)


def test_brokers_on_one_zookeeper_take_distinct_producer_id_blocks(broker_factory, zk_connect):
    brokers = [broker_factory(props={"zookeeper.connect": zk_connect, "broker.id": i}) for i in (1, 2)]
    ids = []
    for b in brokers:
        with Wire(b.bootstrap) as w:
            ids += [init_producer_id(w)[0] for _ in range(2)]
    assert len(set(ids)) == 4
    assert {i // 1000 for i in ids[:2]}.isdisjoint({i // 1000 for i in ids[2:]})  # blocks of 1,000 apart
