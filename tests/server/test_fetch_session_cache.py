"""The fetch session cache's eviction rules (Kafka 2.7's ``FetchSessionCache``), on the cache itself with the
times given: waiting out the 2-minute eviction time against a broker would take minutes per case. The
protocol around it is tested against a broker in ``test_fetch_sessions.py``."""

from __future__ import annotations

from broker.server.fetch_sessions import EVICTION_MS, FetchSessionCache, next_epoch, select_changes

MIN = 60_000


def _topics(n: int, topic: str = "t") -> list[dict]:
    return [{"topic": topic, "partitions": [
        {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
         "partition_max_bytes": 1 << 20} for p in range(n)]}]


def _answer(n: int, hw: int = 5, topic: str = "t", records: dict | None = None) -> list[dict]:
    return [{"topic": topic, "partitions": [
        {"partition_index": p, "error_code": 0, "high_watermark": hw, "last_stable_offset": hw,
         "log_start_offset": 0, "preferred_read_replica": -1, "aborted_transactions": None,
         "records": (records or {}).get(p, b"")} for p in range(n)]}]


def test_a_full_cache_takes_the_place_of_a_session_unused_for_two_minutes():
    evicted = []
    cache = FetchSessionCache(2, on_evict=lambda: evicted.append(1))
    a = cache.create(0, False, _topics(3), _answer(3))
    b = cache.create(1 * MIN, False, _topics(3), _answer(3))
    assert cache.create(1 * MIN, False, _topics(3), _answer(3)) == 0  # both fresh: no room
    cache.touch(cache.get(b), 2 * MIN)
    c = cache.create(EVICTION_MS + 1, False, _topics(1), _answer(1))  # a, unused for over 2 minutes, goes
    assert c and cache.get(a) is None and cache.get(b) is not None and evicted == [1]


def test_an_old_session_gives_way_to_one_as_large_but_a_follower_keeps_its_own():
    cache = FetchSessionCache(2)
    small = cache.create(0, False, _topics(2), _answer(2))
    follower = cache.create(0, True, _topics(50), _answer(50))
    for sid in (small, follower):  # in use, but both created over 2 minutes ago: evictable
        cache.touch(cache.get(sid), EVICTION_MS + 10)
    now = EVICTION_MS + 20
    assert cache.create(now, False, _topics(1), _answer(1)) == 0  # smaller than the smallest: no
    bigger = cache.create(now, False, _topics(5), _answer(5))  # the consumer's small session goes first
    assert bigger and cache.get(small) is None and cache.get(follower) is not None
    # a consumer cannot take a follower's session while a follower can take a consumer's of any age
    assert cache.create(now, False, _topics(500), _answer(500)) == 0 and cache.get(follower) is not None
    cache2 = FetchSessionCache(1)
    consumer = cache2.create(0, False, _topics(10), _answer(10))
    assert cache2.create(1, True, _topics(1), _answer(1)) != 0 and cache2.get(consumer) is None


def test_changes_are_selected_and_undone():
    cache = FetchSessionCache(10)
    sid = cache.create(0, False, _topics(4), _answer(4, hw=5))
    session = cache.get(sid)
    assert session.epoch == 1 and next_epoch(2**31 - 1) == 1 and next_epoch(-1) == -1
    # nothing new: nothing answered
    assert select_changes(session, _answer(4, hw=5))[0] == []
    # partition 2 has records and partition 3 a new high watermark: those two, moved to the back
    answer = _answer(4, hw=5, records={2: b"x" * 10})
    answer[0]["partitions"][3]["high_watermark"] = 9
    picked, undo = select_changes(session, answer)
    assert [p["partition_index"] for p in picked[0]["partitions"]] == [2, 3]
    assert [key[1] for key in session.partitions] == [0, 1, 2, 3]
    answer2 = _answer(4, hw=5, records={0: b"y"})
    answer2[0]["partitions"][3]["high_watermark"] = 9
    picked, undo = select_changes(session, answer2)
    assert [p["partition_index"] for p in picked[0]["partitions"]] == [0]
    assert [key[1] for key in session.partitions] == [1, 2, 3, 0]
    # a throttled answer: the session as it was (order and what was last answered)
    answer3 = _answer(4, hw=5)
    answer3[0]["partitions"][1]["high_watermark"] = 7
    answer3[0]["partitions"][3]["high_watermark"] = 9
    picked, undo = select_changes(session, answer3)
    assert [key[1] for key in session.partitions] == [2, 3, 0, 1]
    undo()
    assert [key[1] for key in session.partitions] == [1, 2, 3, 0]
    assert [p["partition_index"] for p in select_changes(session, answer3)[0][0]["partitions"]] == [1]
