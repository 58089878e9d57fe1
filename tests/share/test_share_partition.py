"""The share-partition state machine (KIP-932, Kafka 4.2's rules) on its own: acquisition, locks, the
delivery limit, acknowledgements all or nothing, the start offset, and the persisted form."""

from __future__ import annotations

import pytest

from broker.protocol import ErrorCode
from broker.share.partition import (ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, AckError, LogBatch,
                                    SharePartition, check_batches)

ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


def batches(*ranges, skip=()):
    """LogBatch per (base, last); positions as if each batch were 100 bytes."""
    return [LogBatch(b, l, (b, l) in skip, i * 100, 100) for i, (b, l) in enumerate(ranges)]


def ack(first, last, *types):
    return {"first_offset": first, "last_offset": last, "acknowledge_types": list(types)}


def test_acquire_whole_batches_skip_markers_and_cap_in_flight():
    sp = SharePartition("g", "t", 0, 0)
    runs, offsets, span = sp.acquire("m1", batches((0, 2), (3, 3), (4, 6), skip={(3, 3)}), max_records=500,
                                     max_in_flight=100, deadline=10.0)
    assert runs == [(0, 2, 1), (4, 6, 1)] and offsets == [0, 1, 2, 4, 5, 6] and span == (0, 300)
    assert sp.records[3].state == ARCHIVED  # a transaction marker: nobody gets it
    assert sp.next_offset == 7 and sp.start_offset == 0
    # max_records is reached at a batch boundary: the crossing batch is taken whole, the next one not
    sp2 = SharePartition("g", "t", 0, 0)
    runs, _o, _s = sp2.acquire("m1", batches((0, 4), (5, 9)), max_records=3, max_in_flight=100, deadline=1.0)
    assert runs == [(0, 4, 1)] and sp2.next_offset == 5
    # the in-flight cap holds inside a batch; the rest is read later
    sp3 = SharePartition("g", "t", 0, 0)
    runs, _o, _s = sp3.acquire("m1", batches((0, 149)), max_records=500, max_in_flight=100, deadline=1.0)
    assert runs == [(0, 99, 1)] and sp3.next_offset == 100 and sp3.in_flight() == 100


def test_release_expiry_and_the_delivery_limit():
    sp = SharePartition("g", "t", 0, 0)
    sp.acquire("m1", batches((0, 1)), 500, 100, deadline=5.0)
    assert sp.expire("m1", [0, 1], now=4.0, limit=3) == 0  # not yet
    assert sp.expire("m2", [0, 1], now=6.0, limit=3) == 0  # not its member's
    assert sp.expire("m1", [0], now=6.0, limit=3) == 1
    assert sp.records[0].state == AVAILABLE and sp.first_to_read() == 0
    for delivery in (2, 3):
        runs, _o, _s = sp.acquire("m2", batches((0, 1)), 500, 100, deadline=9.0)
        assert runs == [(0, 0, delivery)]  # offset 1 is still m1's
        assert sp.release_member("m2", limit=3) == 1
    # released at its third delivery (the limit): archived, and the start offset passes it
    assert 0 not in sp.records and sp.start_offset == 1
    assert sp.release_member("m1", limit=3) == 1 and sp.records[1].state == AVAILABLE


def test_acknowledgements_are_all_or_nothing_and_move_the_start():
    sp = SharePartition("g", "t", 0, 0)
    sp.acquire("m1", batches((0, 4)), 500, 100, deadline=9.0)
    with pytest.raises(AckError) as info:
        sp.acknowledge("m2", [ack(0, 1, ACCEPT)], limit=5)
    assert info.value.code == ErrorCode.INVALID_RECORD_STATE
    with pytest.raises(AckError) as info:
        sp.acknowledge("m1", [ack(0, 9, ACCEPT)], limit=5)  # past what was ever read
    assert info.value.code == ErrorCode.INVALID_REQUEST
    assert all(r.state == ACQUIRED for r in sp.records.values())  # nothing changed
    sp.acknowledge("m1", [ack(0, 2, ACCEPT, REJECT, GAP), ack(3, 4, RELEASE)], limit=5)
    assert sp.start_offset == 3 and sp.records[3].state == AVAILABLE and 0 not in sp.records
    with pytest.raises(AckError):
        sp.acknowledge("m1", [ack(3, 3, ACCEPT)], limit=5)  # released: no longer held
    assert check_batches([ack(2, 1, ACCEPT)]) and check_batches([ack(0, 3, ACCEPT, REJECT)])
    assert check_batches([ack(0, 0, 7)]) and check_batches([ack(5, 6, 1), ack(0, 1, 1)])
    assert check_batches([ack(0, 1, ACCEPT), ack(2, 3, ACCEPT, RELEASE)]) is None


def test_the_persisted_form_round_trips_and_in_flight_records_come_back_available():
    sp = SharePartition("g", "t", 0, 10)
    sp.acquire("m1", batches((10, 14)), 500, 100, deadline=9.0)
    sp.acknowledge("m1", [ack(11, 11, ACCEPT), ack(13, 13, REJECT)], limit=5)
    snap = sp.snapshot()
    assert snap == {"start_offset": 10, "state_batches": [[10, 10, 0, 1], [11, 11, 2, 1], [12, 12, 0, 1],
                                                          [13, 13, 4, 1], [14, 14, 0, 1]]}
    again = SharePartition("g", "t", 0, 0)
    again.restore(snap)
    assert (again.start_offset, again.next_offset) == (10, 15)
    assert [again.records[o].state for o in range(10, 15)] == [AVAILABLE, ACKNOWLEDGED, AVAILABLE, ARCHIVED,
                                                               AVAILABLE]
    runs, _o, _s = again.acquire("m9", batches((10, 14)), 500, 100, deadline=1.0)
    assert runs == [(10, 10, 2), (12, 12, 2), (14, 14, 2)]  # acknowledged ones never again
    again.move_start(13)  # retention removed what was below 13
    assert again.start_offset == 14 and sorted(again.records) == [14]
