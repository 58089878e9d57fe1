"""The replica layer over real logs in real log dirs (a LogManager with its writer threads, a real loop).

Single node is the case the broker runs today (ISR = [self]); a second replica
in the ISR, whose log end offset only its fetches report, shows what the high
watermark and the acks=all purgatory do once followers exist.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from broker.log import LogConfig, LogManager, OffsetOutOfRange
from broker.records import BatchBuilder, iter_batches
from broker.replica import ReplicaManager

LOCAL, FOLLOWER = 0, 1


def batch(n: int, value: bytes = b"v") -> bytes:
    builder = BatchBuilder()
    for i in range(n):
        builder.append(1000 + i, b"k", value)
    return builder.build()


def open_manager(tmp_path) -> tuple[LogManager, ReplicaManager]:
    log_manager = LogManager([tmp_path / "data"], LogConfig(segment_bytes=1 << 20))
    log_manager.startup()
    replicas = ReplicaManager()
    replicas.attach(log_manager, LOCAL)
    return log_manager, replicas


def run(log_manager, replicas, body):
    """Run ``body(loop)`` on a loop that the appenders hand their results to, as the broker does; then shut down."""

    async def main():
        loop = asyncio.get_running_loop()
        log_manager.append_deliver = lambda results: loop.call_soon_threadsafe(replicas.settle, results)
        await asyncio.wait_for(body(loop), 30)

    try:
        asyncio.run(main())
    finally:
        log_manager.shutdown()


def test_a_single_nodes_high_watermark_follows_every_append(tmp_path):
    log_manager, replicas = open_manager(tmp_path)

    async def body(loop):
        p = replicas.make_leader("t", 0, log_manager.create_log("t", 0), leader_epoch=3, isr=[LOCAL],
                                 replicas=[LOCAL])
        first = await replicas.append_records(p, bytearray(batch(2)), loop)
        second = await replicas.append_records(p, bytearray(batch(3)), loop)
        assert (first.first_offset, second.first_offset, second.last_offset) == (0, 2, 4)
        assert p.high_watermark == p.log_end_offset == 5
        assert await replicas.wait_for_high_watermark(p, second.last_offset, 0)
        assert [b.partition_leader_epoch for b in iter_batches(p.read(0, 1 << 20).read_bytes())] == [3, 3]

    run(log_manager, replicas, body)


def test_the_high_watermark_waits_for_the_isr_and_acks_all_waits_in_the_purgatory(tmp_path):
    log_manager, replicas = open_manager(tmp_path)

    async def body(loop):
        p = replicas.make_leader("t", 0, log_manager.create_log("t", 0), leader_epoch=0, isr=[LOCAL, FOLLOWER],
                                 replicas=[LOCAL, FOLLOWER])
        info = await replicas.append_records(p, bytearray(batch(4)), loop)
        assert p.log_end_offset == 4 and p.high_watermark == 0
        # a consumer reads nothing above the high watermark; a follower reads up to the log end
        assert p.read(0, 1 << 20).length == 0
        assert p.read(0, 1 << 20, follower=True).length == len(batch(4))
        assert not await replicas.wait_for_high_watermark(p, info.last_offset, 0.05)  # nobody fetched
        waiter = asyncio.ensure_future(replicas.wait_for_high_watermark(p, info.last_offset, 20))
        await asyncio.sleep(0)
        replicas.update_follower_fetch(p, FOLLOWER, 2)  # half way: still waiting
        await asyncio.sleep(0.01)
        assert not waiter.done() and p.high_watermark == 2
        replicas.update_follower_fetch(p, FOLLOWER, 4)
        assert await waiter and p.high_watermark == 4
        replicas.update_follower_fetch(p, FOLLOWER, 1)  # never backwards
        assert p.high_watermark == 4

    run(log_manager, replicas, body)


def test_follower_appends_keep_the_leaders_offsets_and_epochs(tmp_path):
    log_manager, replicas = open_manager(tmp_path)

    async def body(loop):
        leader = replicas.make_leader("a", 0, log_manager.create_log("a", 0), leader_epoch=7, isr=[LOCAL],
                                      replicas=[LOCAL])
        for n in (2, 1, 3):
            await replicas.append_records(leader, bytearray(batch(n)), loop)
        fetched = leader.read(0, 1 << 20, follower=True).read_bytes()
        # the copy is appended as a follower would: its partition's own epoch (0) must not be written in
        copy = replicas.make_leader("b", 0, log_manager.create_log("b", 0), leader_epoch=0, isr=[LOCAL],
                                    replicas=[LOCAL])
        info = await replicas.append_records_as_follower(copy, bytearray(fetched), loop)
        assert (info.first_offset, info.last_offset) == (0, 5)
        assert copy.read(0, 1 << 20, follower=True).read_bytes() == fetched
        # batches are still validated: a batch below the log end, or a corrupt one, is refused
        with pytest.raises(Exception) as below:
            await replicas.append_records_as_follower(copy, bytearray(fetched), loop)
        assert getattr(below.value, "error_code", None) is not None
        corrupt = bytearray(batch(1))
        corrupt[-1] ^= 0xFF
        with pytest.raises(Exception) as bad_crc:
            await replicas.append_records_as_follower(copy, corrupt, loop)
        assert getattr(bad_crc.value, "error_code", None) == 2  # CORRUPT_MESSAGE
        assert copy.log_end_offset == 6

    run(log_manager, replicas, body)


def test_delete_records_is_bounded_by_the_high_watermark(tmp_path):
    log_manager, replicas = open_manager(tmp_path)
    p = replicas.make_leader("t", 0, log_manager.create_log("t", 0), leader_epoch=0, isr=[LOCAL, FOLLOWER],
                             replicas=[LOCAL, FOLLOWER])
    replicas.append_now(p, batch(5))
    replicas.update_follower_fetch(p, FOLLOWER, 3)
    assert p.high_watermark == 3
    with pytest.raises(OffsetOutOfRange):
        p.delete_records(4)
    with pytest.raises(OffsetOutOfRange):
        p.delete_records(-2)
    assert p.delete_records(-1) == 3 and p.log_start_offset == 3
    log_manager.shutdown()


def test_the_high_watermark_is_checkpointed_and_taken_back_at_restart(tmp_path):
    log_manager, replicas = open_manager(tmp_path)
    p = replicas.make_leader("t", 0, log_manager.create_log("t", 0), leader_epoch=0, isr=[LOCAL, FOLLOWER],
                             replicas=[LOCAL, FOLLOWER])
    replicas.append_now(p, batch(6))
    replicas.update_follower_fetch(p, FOLLOWER, 4)
    log_manager.shutdown()
    text = (tmp_path / "data" / "replication-offset-checkpoint").read_text()
    assert text.split("\n")[2:3] == ["t 0 4"]

    log_manager, replicas = open_manager(tmp_path)
    # a follower still in the ISR that has not fetched since holds it where it was
    again = replicas.make_leader("t", 0, log_manager.get_log(("t", 0)), leader_epoch=1, isr=[LOCAL, FOLLOWER],
                                 replicas=[LOCAL, FOLLOWER])
    assert (again.high_watermark, again.log_end_offset) == (4, 6)
    # ... and with the ISR down to this broker it follows the log end at once
    again.make_leader(2, [LOCAL], [LOCAL, FOLLOWER])
    assert again.high_watermark == 6
    log_manager.shutdown()


def test_nothing_above_the_replica_layer_is_imported_by_it():
    code = ("import sys, broker.replica; "
            "print(sorted(m for m in sys.modules if m.startswith(('broker.server', 'broker.coordinator'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
