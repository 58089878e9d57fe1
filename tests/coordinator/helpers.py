"""Helpers for the coordinator's integration tests: group views over the wire and from the log."""

from __future__ import annotations

import json
import os
import selectors
import struct
import subprocess
import sys
import time
from pathlib import Path

from broker.coordinator.records import GroupKey, GroupMetadataValue, decode_group_value, decode_key, partition_for
from broker.protocol import ApiKey
from broker.records import iter_batches
from tests.server.wire import Wire

MEMBER_PROC = Path(__file__).with_name("member_proc.py")
WAIT_LIMIT_S = 60  # guards against a hang; never what a test asserts


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """ConsumerProtocol assignment: version:int16 [topic:string [partition:int32]] user_data:bytes."""
    if not data:
        return {}
    count = struct.unpack_from(">i", data, 2)[0]
    pos, out = 6, {}
    for _ in range(count):
        n = struct.unpack_from(">h", data, pos)[0]
        topic = data[pos + 2:pos + 2 + n].decode()
        pos += 2 + n
        k = struct.unpack_from(">i", data, pos)[0]
        out[topic] = list(struct.unpack_from(f">{k}i", data, pos + 4))
        pos += 4 + 4 * k
    return out


def describe(bootstrap: str, group: str) -> tuple[str, dict[str, list[int]]]:
    """(state, member id -> partitions of any topic) from DescribeGroups v3."""
    with Wire(bootstrap) as w:
        r = w.call(ApiKey.DESCRIBE_GROUPS, 3, {"groups": [group], "include_authorized_operations": False})
    g = r["groups"][0]
    members = {m["member_id"]: sorted(p for ps in decode_assignment(bytes(m["member_assignment"])).values()
                                      for p in ps) for m in g["members"]}
    return g["group_state"], members


def wait_stable(bootstrap: str, group: str, members: int, partitions: int) -> dict[str, list[int]]:
    """Wait until the group is Stable with ``members`` members owning all ``partitions`` partitions."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    last = None
    while time.monotonic() < deadline:
        state, owned = describe(bootstrap, group)
        last = (state, owned)
        every = sorted(p for ps in owned.values() for p in ps)
        if state == "Stable" and len(owned) == members and every == list(range(partitions)):
            return owned
        time.sleep(0.2)
    raise AssertionError(f"group {group} never became stable with {members} members: {last}")


def group_records(data_dir: Path, group: str, num_partitions: int) -> list[GroupMetadataValue]:
    """Every group metadata record of ``group`` in __consumer_offsets, oldest first (tombstones skipped)."""
    pdir = Path(data_dir) / f"__consumer_offsets-{partition_for(group, num_partitions)}"
    out = []
    for seg in sorted(pdir.glob("*.log")):
        for batch in iter_batches(seg.read_bytes()):
            for r in batch.records:
                key = decode_key(r.key)
                if isinstance(key, GroupKey) and key.group == group and r.value is not None:
                    out.append(decode_group_value(r.value)[1])
    return out


def group_history(data_dir: Path, group: str, num_partitions: int) -> list[tuple[int, dict[str, list[int]]]]:
    """Every group metadata record of ``group`` in __consumer_offsets: (generation, member -> partitions)."""
    return [(g.generation, {m.member_id: sorted(p for ps in decode_assignment(m.assignment).values() for p in ps)
                            for m in g.members})
            for g in group_records(data_dir, group, num_partitions)]


def start_member(lib: str, bootstrap: str, group: str, topic: str, assignor: str = "",
                 log_path: Path | None = None, instance_id: str | None = None, session_ms: int | None = None,
                 max_poll_ms: int | None = None) -> subprocess.Popen:
    """A member process (static with ``instance_id``); its client library's log goes to
    ``log_path`` (for post-mortems) or nowhere."""
    env = dict(os.environ)
    for name, value in (("INSTANCE_ID", instance_id), ("SESSION_MS", session_ms), ("MAX_POLL_MS", max_poll_ms)):
        if value is not None:
            env[f"KAFKAPY_MEMBER_{name}"] = str(value)
    stderr = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen([sys.executable, str(MEMBER_PROC), lib, bootstrap, group, topic, assignor],
                                stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
    finally:
        if log_path is not None:
            stderr.close()


class MemberOutput:
    """The assignment lines a running member process prints, read as they come."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.assignments: list[list[int]] = []
        self._buf = b""

    def read(self, seconds: float) -> list[list[int]]:
        """Collect what the member prints during ``seconds``; returns the lines that came."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + seconds
        start = len(self.assignments)
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0 and sel.select(left):
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                self._buf += chunk
                *lines, self._buf = self._buf.split(b"\n")
                self.assignments += [json.loads(x)["assigned"] for x in lines if x.startswith(b"{")]
        return self.assignments[start:]

    def wait_assigned(self, limit_s: float = WAIT_LIMIT_S) -> list[int]:
        """Wait for the next assignment line with partitions in it."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            for line in self.read(min(0.2, max(deadline - time.monotonic(), 0))):
                if line:
                    return line
        raise AssertionError(f"member {self.proc.pid} got no assignment: {self.assignments}")
