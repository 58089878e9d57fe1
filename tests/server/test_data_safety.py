"""A log dir has one owner, and a broker that does not start writes nothing.

The scenarios of the defect they guard against: a second broker started on a
live broker's dir (refused before it reads or writes anything, in any of its
dirs), a start that fails because its port is taken (no clean-shutdown marker,
no checkpoint written), a ``kill -9`` of the owner and its restart (recovery
runs, says so in its start-up line, cuts the torn tail, and a real client reads
back every acknowledged record and nothing else).
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time

import pytest
import yaml

from broker.log import LogDirInUseError, lock_log_dirs
from tests.kafkactl.conftest import one_line_error, run

from .wire import make_batch

ck = pytest.importorskip("confluent_kafka")

RUN_LIMIT_S = 60  # guards against a hang, not a timing assertion
# The running owner must not write its periodic checkpoints while a test compares files.
QUIET = {"log.flush.offset.checkpoint.interval.ms": 3_600_000}


def produce_acked(bootstrap: str, topic: str, n: int) -> list[bytes]:
    acked: list[bytes] = []
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

    def on_delivery(err, msg):
        assert err is None, err
        acked.append(msg.value())

    for i in range(n):
        producer.produce(topic, b"rec-%05d" % i, partition=0, on_delivery=on_delivery)
    assert producer.flush(RUN_LIMIT_S) == 0
    return acked


def consume_all(bootstrap: str, topic: str) -> list[bytes]:
    """Every record of partition 0, from the beginning to the end of the log."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{time.monotonic_ns()}",
                            "enable.partition.eof": True, "enable.auto.commit": False,
                            "fetch.queue.backoff.ms": 10})
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + RUN_LIMIT_S
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
                return values
            values.append(msg.value())
        raise AssertionError("never reached the end of the log")
    finally:
        consumer.close()


def files_of(directory) -> dict[str, tuple[int, int, str]]:
    """Every file under ``directory``: relative path -> (size, mtime_ns, sha256 of the content)."""
    out = {}
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            st = os.stat(path)
            with open(path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            out[os.path.relpath(path, directory)] = (st.st_size, st.st_mtime_ns, digest)
    return out


def data_and_checkpoints(directory) -> dict[str, tuple[int, int, str]]:
    """:func:`files_of` without the indexes: derived data that any start may rebuild or trim."""
    return {name: entry for name, entry in files_of(directory).items()
            if not name.endswith((".index", ".timeindex"))}


def run_broker_expecting_failure(workdir, props: dict) -> tuple[int, list[str]]:
    """Start ``python -m broker`` that must not start; returns its exit status and stderr lines."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "broker.yaml"
    config.write_text(yaml.safe_dump({"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "metrics.port": -1,
                                      "offsets.topic.replication.factor": 1, **props}))
    proc = subprocess.run([sys.executable, "-m", "broker", "--config", str(config)], cwd=workdir,
                          capture_output=True, text=True, timeout=RUN_LIMIT_S)
    assert "broker ready" not in proc.stdout
    return proc.returncode, proc.stderr.splitlines()


def startup_line(broker) -> str:
    lines = [line for line in broker.stderr_text().splitlines() if "broker.log.manager: loaded" in line]
    assert lines, broker.stderr_tail()
    return lines[-1]


def test_second_broker_on_a_live_dir_is_refused_and_kill_9_then_restart_recovers(broker_factory, tmp_path):
    a = broker_factory(QUIET)
    acked = produce_acked(a.bootstrap, "safe", 200)
    assert len(acked) == 200

    # B names a fresh dir first and A's dir second: it must give the first one back untouched.
    fresh = tmp_path / "fresh"
    before = files_of(a.data_dir)
    code, err = run_broker_expecting_failure(tmp_path / "b", {"log.dirs": f"{fresh},{a.data_dir}"})
    assert code == 1
    assert err == [f"broker: cannot start: log dir {a.data_dir} is in use by another process "
                   f"(it holds the lock on {a.data_dir / '.lock'})"]
    assert files_of(a.data_dir) == before
    assert not (a.data_dir / ".kafka_cleanshutdown").exists()
    assert sorted(os.listdir(fresh)) == [".lock"]  # no meta.properties, no metadata store
    lock_log_dirs([fresh]).release()  # B released what it had taken
    assert a.running()

    # The offline recovery tool keeps out of a live dir too (its dry run only reads).
    res = run([sys.executable, "-m", "kafkactl", "log", "recover", str(a.data_dir / "safe-0")])
    assert one_line_error(res, 1) == (f"kafkactl: log dir {a.data_dir} is in use by another process (it holds "
                                      f"the lock on {a.data_dir / '.lock'}): stop its broker first")
    assert run([sys.executable, "-m", "kafkactl", "log", "recover", "--dry-run", str(a.data_dir)]).returncode == 0
    assert files_of(a.data_dir) == before

    # A dies without a clean shutdown, in the middle of a write.
    a.kill()
    segment = a.data_dir / "safe-0" / "00000000000000000000.log"
    valid = segment.stat().st_size
    torn = make_batch([b"torn" * 50])[:70]
    with open(segment, "ab") as fh:
        fh.write(torn)
    assert not (a.data_dir / ".kafka_cleanshutdown").exists()

    a.start()
    line = startup_line(a)
    assert f"{a.data_dir}: unclean shutdown before" in line
    assert f"cut {len(torn)} bytes: {len(torn)} bytes of safe-0/00000000000000000000.log at position {valid}" in line
    assert "bytes checked" in line and " s: " in line
    assert not any("-%d bytes" % len(torn) in x for x in a.stderr_text().splitlines())
    assert segment.stat().st_size == valid
    assert consume_all(a.bootstrap, "safe") == acked  # every acknowledged record, nothing after them
    assert produce_acked(a.bootstrap, "safe", 1) == [b"rec-00000"]
    assert consume_all(a.bootstrap, "safe") == acked + [b"rec-00000"]


def test_a_start_that_cannot_bind_its_port_writes_nothing(broker_factory, tmp_path):
    a = broker_factory(QUIET)
    produce_acked(a.bootstrap, "kept", 50)
    a.kill()  # an unclean dir: a failed start must not mark it clean
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    props = {"log.dirs": str(a.data_dir), "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    try:
        before = data_and_checkpoints(a.data_dir)
        code, err = run_broker_expecting_failure(tmp_path / "b", props)
        assert code == 1 and len(err) >= 1 and err[-1].startswith("broker: cannot start:"), err
        assert not (a.data_dir / ".kafka_cleanshutdown").exists()
        assert data_and_checkpoints(a.data_dir) == before

        # A clean dir stays clean: the failed start removed no marker either.
        a.start()
        assert a.stop() == 0
        marked = data_and_checkpoints(a.data_dir)
        assert ".kafka_cleanshutdown" in marked
        code, err = run_broker_expecting_failure(tmp_path / "c", props)
        assert code == 1
        assert data_and_checkpoints(a.data_dir) == marked
    finally:
        taken.close()
    a.start()
    assert f"{a.data_dir}: clean shutdown before" in startup_line(a)
    assert len(consume_all(a.bootstrap, "kept")) == 50


def test_log_dir_locks_conflict_in_one_process_and_with_a_posix_lock(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    held = lock_log_dirs([one, two])
    with pytest.raises(LogDirInUseError, match="log dir .*two is in use"):
        lock_log_dirs([tmp_path / "three", two])
    held.release()
    lock_log_dirs([tmp_path / "three", two]).release()  # the failed attempt left nothing locked
    with pytest.raises(LogDirInUseError, match="listed twice"):
        lock_log_dirs([one, tmp_path / "." / "one"])

    # Another process holding a POSIX record lock (what the JVM's FileChannel.tryLock takes: an
    # Apache Kafka broker on the same dir) keeps us out.
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB); "
         "print('locked', flush=True); sys.stdin.read()", str(one / ".lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LogDirInUseError):
            lock_log_dirs([one])
    finally:
        holder.stdin.close()
        holder.wait(RUN_LIMIT_S)
    lock_log_dirs([one]).release()
