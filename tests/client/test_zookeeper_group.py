"""Our consumer as a legacy ZooKeeper consumer (``group.protocol=zookeeper``), with real ZooKeeper,
a real broker and consumer processes killed with SIGKILL.

Ownership is checked three ways: each process reports every assignment change with its own
timestamp (taken after its claim, before its release), and no two processes' intervals for one
partition may overlap; a watcher thread records every owners znode it sees, and an owner may only
change with a new znode (nobody overwrites another's claim); and a killed consumer's partitions
move only after ZooKeeper ended its session.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from broker.client import Admin, NewTopic, Producer, TopicPartition
from broker.client._zk_group import range_assignment
from broker.client._zookeeper import Registration
from tests.tcp_gate import TcpGate
from tests.zookeeper import expire_session

ROOT = Path(__file__).resolve().parents[2]
SESSION_MS = 3000
COMMIT_MS = 500
LEGACY = ["group.protocol=zookeeper", f"zookeeper.session.timeout.ms={SESSION_MS}", "rebalance.backoff.ms=200",
          f"auto.commit.interval.ms={COMMIT_MS}"]
WAIT_S = 60  # a guard against a hang, not a performance assertion


class ConsumerProc:
    """A tests/client/zk_consumer_proc.py process and the JSON lines it printed so far."""

    def __init__(self, bootstrap: str, group: str, topic: str, props: list[str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.client.zk_consumer_proc", bootstrap, group, topic,
                                      *props], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
        self.events: list[dict] = []
        self.killed_at: float | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    @property
    def member(self) -> str | None:
        return next((e["member"] for e in self.events if "member" in e), None)

    def assignment(self) -> set[tuple[str, int]]:
        changes = [e for e in self.events if "assigned" in e]
        return {tuple(tp) for tp in changes[-1]["assigned"]} if changes else set()

    def records(self) -> list[tuple[int, int, str, float]]:
        return [(p, o, v, e["t"]) for e in list(self.events) if "records" in e for p, o, v in e["records"]]

    def kill(self) -> None:
        self.killed_at = time.time()
        self.proc.kill()
        self.proc.wait()
        self.reader.join(5)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(WAIT_S)
        self.reader.join(5)

    def intervals(self) -> dict[tuple[str, int], list[tuple[float, float]]]:
        """Per partition, the [assigned, revoked) times this process reported (killed: until the kill)."""
        out: dict[tuple[str, int], list] = {}
        held: dict[tuple[str, int], float] = {}
        for e in [e for e in self.events if "assigned" in e]:
            now = {tuple(tp) for tp in e["assigned"]}
            for tp in now - set(held):
                held[tp] = e["t"]
            for tp in set(held) - now:
                out.setdefault(tp, []).append((held.pop(tp), e["t"]))
        end = self.killed_at or float("inf")
        for tp, start in held.items():
            out.setdefault(tp, []).append((start, end))
        return out


class OwnersWatcher(threading.Thread):
    """Reads every owners znode of a group's topic in a loop; records (time, partition, owner, czxid)."""

    def __init__(self, zk: KazooClient, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.zk, self.base = zk, f"/consumers/{group}/owners/{topic}"
        self.seen: list[tuple[float, int, str | None, int | None]] = []
        self.last: dict[int, tuple[str | None, int | None]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                names = self.zk.get_children(self.base)
            except NoNodeError:
                names = []
            state = {p: (None, None) for p in self.last}
            for name in names:
                try:
                    data, stat = self.zk.get(f"{self.base}/{name}")
                except NoNodeError:
                    continue
                state[int(name)] = (data.decode(), stat.czxid)
            for p, value in state.items():
                if self.last.get(p) != value:
                    self.seen.append((time.time(), p, *value))
                    self.last[p] = value
            time.sleep(0.01)

    def owners(self) -> dict[int, str]:
        return {p: owner for p, (owner, _) in self.last.items() if owner is not None}

    def check(self) -> None:
        """An owner changes only with a new znode: nobody overwrote another consumer's claim."""
        by_zxid: dict[int, str] = {}
        for _, p, owner, czxid in self.seen:
            if czxid is not None:
                assert by_zxid.setdefault(czxid, owner) == owner, (p, czxid)


def wait_for(condition, what: str, limit: float = WAIT_S) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def assert_exclusive(procs: list[ConsumerProc]) -> None:
    spans: dict[tuple[str, int], list] = {}
    for proc in procs:
        for tp, ivs in proc.intervals().items():
            spans.setdefault(tp, []).extend((a, b, proc.member) for a, b in ivs)
    for tp, ivs in spans.items():
        ivs.sort()
        for (a1, b1, m1), (a2, b2, m2) in zip(ivs, ivs[1:]):
            assert b1 <= a2, f"{tp} held by {m1} until {b1} and by {m2} from {a2}"


def test_range_assignment_gives_the_remainder_to_the_first_consumers():
    consumers = {c: Registration("static", ["t"]) for c in ("g_b", "g_a", "g_c")}
    got = {c: [tp.partition for tp in range_assignment(c, {"t": 10}, consumers)] for c in consumers}
    assert got == {"g_a": [0, 1, 2, 3], "g_b": [4, 5, 6], "g_c": [7, 8, 9]}
    consumers["g_d"] = Registration("white_list", ["o.*"])  # subscribes to other topics only
    assert [tp.partition for tp in range_assignment("g_a", {"t": 10}, consumers)] == [0, 1, 2, 3]
    assert range_assignment("g_d", {"t": 10}, consumers) == []


@pytest.mark.parametrize("members", [2, 3])
def test_killed_consumer_partitions_move_only_after_its_session_ends(broker, zk, zk_connect, members):
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("clicks", 6, 1)])
    props = [*LEGACY, f"zookeeper.connect={zk_connect}"]
    watcher = OwnersWatcher(zk, "legacy", "clicks")
    watcher.start()
    procs = [ConsumerProc(broker.bootstrap, "legacy", "clicks", props) for _ in range(members)]
    try:
        wait_for(lambda: len(watcher.owners()) == 6 and len(set(watcher.owners().values())) == members
                 and all(p.member for p in procs), f"{members} consumers to own the 6 partitions")
        live = sorted(procs, key=lambda p: p.member)
        per = 6 // members
        expected = {live[i].member + "-0": set(range(i * per, (i + 1) * per)) for i in range(members)}
        wait_for(lambda: {o: {p for p, x in watcher.owners().items() if x == o} for o in expected} == expected,
                 "the range assignment")
        for proc in procs:
            wait_for(lambda: {p for _, p in proc.assignment()} == expected[proc.member + "-0"], "reports")

        victim = live[0]
        victim.kill()
        survivors = [p for p in procs if p is not victim]
        wait_for(lambda: set(watcher.owners().values()) == {p.member + "-0" for p in survivors}
                 and len(watcher.owners()) == 6, "the survivors to own everything")
        for proc in survivors:
            wait_for(lambda: len(proc.assignment()) == 6 // len(survivors), "the survivors' reports")
        taken = [min(a for a, _ in proc.intervals()[("clicks", p)] if a > victim.killed_at)
                 for p in expected[victim.member + "-0"] for proc in survivors if ("clicks", p) in proc.assignment()]
        # ZooKeeper ends a session no sooner than about two thirds of its timeout after the last
        # ping, which kazoo sends every third of it: a third of the timeout is a safe lower bound
        assert min(taken) - victim.killed_at >= SESSION_MS / 3000, "taken over before the session ended"
    finally:
        for proc in procs:
            proc.stop()
        watcher.done.set()
        watcher.join(5)
    watcher.check()
    assert_exclusive(procs)
    assert zk.get_children("/consumers/legacy/ids") == []  # the clean ones deregistered
    assert watcher.owners() == {}


class RunningProducer(threading.Thread):
    """Produces "p-<n>" to 3 partitions round-robin until stopped; knows what it acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stopped = threading.Event()
        self.sent = 0

    def run(self) -> None:
        with Producer(bootstrap_servers=self.bootstrap, linger_ms=1) as producer:
            while not self.stopped.is_set():
                producer.send(self.topic, f"v-{self.sent}".encode(), partition=self.sent % 3).result(30)
                self.sent += 1
                time.sleep(0.005)


def zk_offsets(zk: KazooClient, group: str, topic: str) -> dict[int, int]:
    base = f"/consumers/{group}/offsets/{topic}"
    try:
        return {int(p): int(zk.get(f"{base}/{p}")[0]) for p in zk.get_children(base)}
    except NoNodeError:
        return {}


def broker_offsets(bootstrap: str, group: str) -> dict[int, int]:
    with Admin(bootstrap_servers=bootstrap) as admin:
        return {tp.partition: om.offset for tp, om in admin.list_group_offsets(group).items()}


def test_four_step_migration_and_rollback_with_a_producer_running(broker, zk, zk_connect):
    """The documented migration steps with legacy consumers: ZooKeeper only; then kafka + dual commit (1), verify
    (2), dual commit off (3), verify (4); then the rollback the same way with offsets_storage
    zookeeper. Every switch restarts the consumer, half of them by SIGKILL."""
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("orders", 3, 1)])
    producer = RunningProducer(broker.bootstrap, "orders")
    producer.start()
    base = [*LEGACY, f"zookeeper.connect={zk_connect}"]
    phases = [
        ("legacy: offsets in ZooKeeper", ["offsets.storage=zookeeper"], "kill"),
        ("1. kafka + dual commit", ["offsets.storage=kafka", "dual.commit.enabled=true"], "term"),
        ("3. kafka only", ["offsets.storage=kafka", "dual.commit.enabled=false"], "kill"),
        ("rollback 1. zookeeper + dual commit", ["offsets.storage=zookeeper", "dual.commit.enabled=true"], "term"),
        ("rollback 3. zookeeper only", ["offsets.storage=zookeeper", "dual.commit.enabled=false"], "term"),
    ]
    procs, seen = [], {}
    try:
        for name, props, ending in phases:
            proc = ConsumerProc(broker.bootstrap, "legacy", "orders", base + props)
            procs.append(proc)
            start_sent = producer.sent
            wait_for(lambda: len(proc.records()) > 0 and producer.sent > start_sent + 150, f"{name} to consume")
            before = (zk_offsets(zk, "legacy", "orders"), broker_offsets(broker.bootstrap, "legacy"))
            time.sleep(3 * COMMIT_MS / 1000)  # a few commits in this phase
            after = (zk_offsets(zk, "legacy", "orders"), broker_offsets(broker.bootstrap, "legacy"))
            seen[name] = (before, after)
            if name.startswith("legacy"):  # real legacy data: the migration refuses while it is live
                res = subprocess.run([sys.executable, "-m", "kafkactl", "-b", broker.bootstrap, "offsets",
                                      "migrate-from-zookeeper", "--zookeeper", zk_connect], capture_output=True,
                                     text=True, cwd=ROOT, timeout=WAIT_S)
                assert res.returncode == 1 and "legacy consumer(s) still registered" in res.stderr
            if ending == "kill":
                proc.kill()
            else:
                proc.stop()
        # let the last phase read everything produced up to the stop
        producer.stopped.set()
        producer.join(30)
        last = ConsumerProc(broker.bootstrap, "legacy", "orders", base + ["offsets.storage=zookeeper"])
        procs.append(last)
        wait_for(lambda: sum(zk_offsets(zk, "legacy", "orders").values()) == producer.sent, "the final commit")
        last.stop()
    finally:
        producer.stopped.set()
        for proc in procs:
            proc.stop()

    def moved(before: dict, after: dict) -> bool:
        return sum(after.values()) > sum(before.values())

    (zb, bb), (za, ba) = seen["legacy: offsets in ZooKeeper"]
    assert moved(zb, za) and ba == bb == {}, "ZooKeeper only"
    (zb, bb), (za, ba) = seen["1. kafka + dual commit"]
    assert moved(zb, za) and moved(bb, ba), "both"
    (zb, bb), (za, ba) = seen["3. kafka only"]
    assert za == zb and moved(bb, ba), "the broker only"
    (zb, bb), (za, ba) = seen["rollback 1. zookeeper + dual commit"]
    assert moved(zb, za) and moved(bb, ba), "both again"
    (zb, bb), (za, ba) = seen["rollback 3. zookeeper only"]
    assert moved(zb, za) and ba == bb, "ZooKeeper only again"

    # no record skipped; a duplicate only from a killed consumer's last commit interval
    delivered: dict[tuple[int, int], list] = {}
    for proc in procs:
        for p, offset, value, t in proc.records():
            delivered.setdefault((p, offset), []).append((t, proc))
    per_partition = {p: sorted(o for q, o in delivered if q == p) for p in range(3)}
    for p, offsets in per_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {p} has a gap"
    assert sum(len(o) for o in per_partition.values()) == producer.sent
    margin = COMMIT_MS / 1000 + 3.0  # one commit interval, plus a generous allowance for a loaded machine
    for (p, offset), deliveries in delivered.items():
        for t, proc in deliveries[:-1] if len(deliveries) > 1 else []:
            assert proc.killed_at is not None, f"{p}/{offset} delivered twice without a crash"
            assert proc.killed_at - t <= margin, f"{p}/{offset} re-delivered though read {proc.killed_at - t:.1f} s " \
                                                 "before the crash"


@pytest.mark.parametrize("props, says", [
    ({"group.protocol": "zookeeper"}, "zookeeper_connect is needed"),
    ({"offsets.storage": "zookeeper"}, "zookeeper_connect is needed"),
    ({"dual.commit.enabled": "true"}, "zookeeper_connect is needed"),
    ({"offsets.storage": "hbase", "zookeeper.connect": "h:1"}, "offsets_storage must be kafka or zookeeper"),
    ({"group.protocol": "consumer"}, "group_protocol must be classic or zookeeper"),
])
def test_bad_legacy_settings_are_config_errors(props, says):
    from broker.client import Consumer, errors

    with pytest.raises(errors.ConfigError, match=says):
        Consumer({"group.id": "g", **props})


def test_unreachable_zookeeper_is_one_error():
    from broker.client import Consumer, errors
    from tests.zookeeper import free_port

    with pytest.raises(errors.ZooKeeperError, match="cannot reach ZooKeeper"):
        Consumer({"group.id": "g", "group.protocol": "zookeeper", "zookeeper.connect": f"127.0.0.1:{free_port()}",
                  "zookeeper.connection.timeout.ms": 1000})


def poll_until(consumer, condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        consumer.poll(100)


def test_expired_session_loses_partitions_then_registers_anew(broker, zookeeper, zk, zk_connect):
    """LOST (session expired: our ephemeral znodes are gone) is reported as lost partitions; the
    consumer registers with its new session and claims its partitions again."""
    from broker.client import Consumer

    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("clicks", 2, 1)])
    events = []
    gate = TcpGate(zookeeper.port)  # the consumer's way to ZooKeeper, shut while its session is expired
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "legacy", "group.protocol": "zookeeper",
                         "zookeeper.connect": gate.address + "/" + zk_connect.partition("/")[2],
                         "zookeeper.session.timeout.ms": SESSION_MS, "rebalance.backoff.ms": 200})
    try:
        consumer.subscribe(["clicks"], on_assign=lambda ps: events.append(("assign", sorted(ps))),
                           on_lost=lambda ps: events.append(("lost", sorted(ps))))
        poll_until(consumer, lambda: len(consumer.assignment()) == 2, "the assignment")
        owner = consumer.member_id + "-0"
        assert zk.get("/consumers/legacy/owners/clicks/0")[0].decode() == owner

        session = consumer._core._zookeeper.client.client_id
        expire_session(session, gate, zookeeper.connect)

        poll_until(consumer, lambda: ("lost", [TopicPartition("clicks", 0), TopicPartition("clicks", 1)]) in events,
                   "the partitions to be reported lost")
        poll_until(consumer, lambda: len(consumer.assignment()) == 2, "the new claim")
        assert events[-1] == ("assign", [TopicPartition("clicks", 0), TopicPartition("clicks", 1)])
        assert consumer._core._zookeeper.client.client_id[0] != session[0]
        assert zk.get_children("/consumers/legacy/ids") == [consumer.member_id]
        assert zk.get("/consumers/legacy/owners/clicks/1")[0].decode() == owner
    finally:
        consumer.close()
        gate.close()
    assert zk.get_children("/consumers/legacy/ids") == []


def test_classic_group_with_offsets_in_zookeeper(broker, zk, zk_connect):
    """offsets_storage applies to the broker's group protocol too: commits land in ZooKeeper only."""
    from broker.client import Consumer

    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("clicks", 1, 1)])
    with Producer(bootstrap_servers=broker.bootstrap) as producer:
        for i in range(5):
            producer.send("clicks", b"x", partition=0)
    zk.create("/consumers/modern/offsets/clicks/0", b"2\n", makepath=True)  # as a legacy consumer left it
    with Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "modern", "offsets.storage": "zookeeper",
                   "zookeeper.connect": zk_connect, "enable.auto.commit": "false"}) as consumer:
        consumer.subscribe(["clicks"])
        records = []
        deadline = time.monotonic() + WAIT_S
        while len(records) < 3 and time.monotonic() < deadline:
            records += consumer.poll(200)
        assert [r.offset for r in records] == [2, 3, 4]  # started from ZooKeeper's offset
        consumer.commit()
    assert zk_offsets(zk, "modern", "clicks") == {0: 5}
    assert broker_offsets(broker.bootstrap, "modern") == {}


def test_suspended_connection_stops_reading_and_keeps_the_claims(broker, tmp_path):
    """SUSPENDED (ZooKeeper gone, session alive): the partitions are reported lost at once; when
    the server is back within the session, the same owner znodes are claimed again, not recreated."""
    from broker.client import Consumer
    from tests.zookeeper import ZooKeeperServer

    server = ZooKeeperServer(tmp_path / "zk").start()
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("clicks", 2, 1)])
    events = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "legacy", "group.protocol": "zookeeper",
                         "zookeeper.connect": server.connect, "zookeeper.session.timeout.ms": 20000,
                         "rebalance.backoff.ms": 200})
    zk = KazooClient(hosts=server.connect, timeout=20)
    try:
        consumer.subscribe(["clicks"], on_assign=lambda ps: events.append(("assign", sorted(ps))),
                           on_lost=lambda ps: events.append(("lost", sorted(ps))))
        poll_until(consumer, lambda: len(consumer.assignment()) == 2, "the assignment")
        session = consumer._core._zookeeper.client.client_id
        zk.start(timeout=30)
        czxid = zk.get("/consumers/legacy/owners/clicks/0")[1].czxid
        zk.stop()

        server.kill()
        poll_until(consumer, lambda: consumer.assignment() == set(), "the partitions to be dropped")
        assert events[-1] == ("lost", [TopicPartition("clicks", 0), TopicPartition("clicks", 1)])
        server.start()
        poll_until(consumer, lambda: len(consumer.assignment()) == 2, "the claim again")
        zk.start(timeout=30)
        data, stat = zk.get("/consumers/legacy/owners/clicks/0")
        assert data.decode() == consumer.member_id + "-0"
        # Usually the restarted server restores the session, and our znodes with it. Now and then
        # (about one run in ten here) it has expired it instead: then this was the LOST path, and
        # the claim is a new znode of a new session.
        same_session = consumer._core._zookeeper.client.client_id == session
        assert (stat.czxid == czxid) == same_session
    finally:
        consumer.close()
        zk.stop()
        zk.close()
        server.stop()


def test_a_request_while_zookeeper_is_unreachable_fails_at_once_and_works_again_after(tmp_path):
    """kazoo would hold a request made while it reconnects until the server is back, and a consumer's
    poll waiting on it with it; ours fails such a request with one error, and is whole once the
    server returns."""
    from broker.client import ZooKeeperOffsetStore
    from broker.client.errors import ZooKeeperError
    from tests.zookeeper import ZooKeeperServer

    server = ZooKeeperServer(tmp_path / "zk").start()
    store = ZooKeeperOffsetStore(server.connect, session_timeout_ms=20000)
    try:
        store.client.ensure_path("/consumers/billing/ids")
        server.kill()
        deadline = time.monotonic() + WAIT_S
        while store.client.connected:
            assert time.monotonic() < deadline, "the client never noticed the server was gone"
            time.sleep(0.05)
        outcome = []

        def ask():
            try:
                outcome.append(store.groups())
            except ZooKeeperError as exc:
                outcome.append(exc)

        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        asker.join(WAIT_S)
        assert not asker.is_alive(), "a request made while ZooKeeper was down waited for it"
        assert isinstance(outcome[0], ZooKeeperError) and "ConnectionLoss" in str(outcome[0]), outcome

        server.start()
        deadline = time.monotonic() + WAIT_S
        while not store.client.connected:
            assert time.monotonic() < deadline, "the client never reconnected"
            time.sleep(0.05)
        assert store.groups() == ["billing"]
    finally:
        store.close()
        server.stop()


def test_a_consumer_registered_the_old_way_gets_its_range_share(broker, zk, zk_connect):
    """A registration as old Kafka consumers wrote it counts in the range assignment: ours waits
    for nothing it is not given, and takes only its share."""
    from broker.client import Consumer

    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("clicks", 5, 1)])
    old = b'{"version":1,"subscription":{"clicks":1},"pattern":"static","timestamp":"1400000000000"}'
    zk.create("/consumers/legacy/ids/legacy_!old", old, ephemeral=True, makepath=True)  # '!' sorts first
    with Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "legacy", "group.protocol": "zookeeper",
                   "zookeeper.connect": zk_connect, "rebalance.backoff.ms": 200}) as consumer:
        consumer.subscribe(["clicks"])
        poll_until(consumer, lambda: len(consumer.assignment()) == 2, "our share")
        assert consumer.assignment() == {TopicPartition("clicks", 3), TopicPartition("clicks", 4)}
        zk.delete("/consumers/legacy/ids/legacy_!old")  # it leaves: we take everything
        poll_until(consumer, lambda: len(consumer.assignment()) == 5, "everything")
        assert sorted(zk.get_children("/consumers/legacy/owners/clicks")) == ["0", "1", "2", "3", "4"]
