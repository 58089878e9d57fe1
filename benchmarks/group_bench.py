"""Group coordinator benchmark: offset round trips and rebalance time, against Metadata.

``python -m benchmarks.group_bench [--short] [--json FILE]``

One broker (``python -m broker``, ephemeral port, temporary data dir) serves the
whole run. One confluent-kafka client measures, one request at a time:

* Metadata round trips/s (``list_topics`` of one topic): the baseline, the cheapest
  request the broker answers;
* OffsetCommit round trips/s (synchronous ``commit`` of one partition; each is an
  append to ``__consumer_offsets`` before the answer);
* OffsetFetch round trips/s (``committed`` of one partition, from the cache).

Then a 10-member group (confluent-kafka consumers in this process, polled in turn,
session.timeout.ms=6000, heartbeat.interval.ms=1000) over a 10-partition topic, three times: with the
classic protocol and librdkafka's default eager assignors, with cooperative-sticky, and with the consumer
protocol (KIP-848, ``group.protocol=consumer``: the broker assigns; its heartbeat interval is the broker's
``group.consumer.heartbeat.interval.ms``, 1 s here as the classic members'):

* form: from the first ``subscribe`` to all ten holding a partition;
* leave: from one member's ``close`` (LeaveGroup) to the nine others Stable
  holding all ten partitions (members learn of a rebalance from their next
  heartbeat, so this is bounded below by the heartbeat interval).

The ratio column is round trips/s relative to Metadata in the same run, and for the rebalances the time
relative to the eager classic group's in the same run.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

from confluent_kafka import Consumer, TopicPartition

from benchmarks._load import create_topic
from benchmarks._procs import OurBroker
from broker.protocol import ApiKey, decode_response, encode_request

LIMIT_S = 120.0


def _describe_state(bootstrap: str, group: str, protocol: str = "classic") -> tuple[str, int]:
    """(state, members) by DescribeGroups, or by ConsumerGroupDescribe for the consumer protocol."""
    host, port = bootstrap.rsplit(":", 1)
    api, version, body = ((ApiKey.DESCRIBE_GROUPS, 3, {"groups": [group], "include_authorized_operations": False})
                          if protocol == "classic" else
                          (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                               "include_authorized_operations": False}))
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(encode_request(api, version, 1, "bench", body))
        size = struct.unpack(">i", _exact(sock, 4))[0]
        _cid, answer = decode_response(api, version, _exact(sock, size))
    g = answer["groups"][0]
    return g["group_state"], len(g["members"])


def _exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _rate(fn, seconds: float) -> float:
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        fn()
        count += 1
    return count / elapsed


def round_trips(bootstrap: str, topic: str, seconds: float) -> dict[str, float]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-offsets", "enable.auto.commit": False})
    tp = TopicPartition(topic, 0)
    c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)  # coordinator found, topic warm
    counter = iter(range(2, 1 << 62))
    out = {
        "metadata_rt_s": _rate(lambda: c.list_topics(topic, timeout=10), seconds),
        "offset_commit_rt_s": _rate(
            lambda: c.commit(offsets=[TopicPartition(topic, 0, next(counter))], asynchronous=False), seconds),
        "offset_fetch_rt_s": _rate(lambda: c.committed([tp], timeout=10), seconds),
    }
    c.close()
    return out


def _poll_until(consumers: list[Consumer], done, what: str) -> None:
    deadline = time.monotonic() + LIMIT_S
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        for c in consumers:
            c.poll(0.01)


def rebalance(bootstrap: str, topic: str, members: int, protocol: str = "classic") -> dict[str, float]:
    """``protocol``: ``classic`` (eager range, the client's default), ``cooperative`` (cooperative-sticky) or
    ``consumer`` (KIP-848: the broker assigns; its heartbeat interval is the broker's, set to 1 s here)."""
    group = f"bench-rebalance-{protocol}"
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
        if protocol == "cooperative":
            conf["partition.assignment.strategy"] = "cooperative-sticky"
    consumers = [Consumer(conf) for _ in range(members)]
    start = time.perf_counter()
    for c in consumers:
        c.subscribe([topic])
    _poll_until(consumers, lambda: all(c.assignment() for c in consumers), f"{members} members to form a group")
    form_s = time.perf_counter() - start
    leaving, rest = consumers[0], consumers[1:]
    start = time.perf_counter()
    leaving.close()

    def settled() -> bool:
        owned = sorted(tp.partition for c in rest for tp in c.assignment())
        return owned == list(range(members)) and _describe_state(bootstrap, group, "classic" if protocol != "consumer"
                                                                    else "consumer") == ("Stable", len(rest))

    _poll_until(rest, settled, "the group to settle after a leave")
    leave_s = time.perf_counter() - start
    for c in rest:
        c.close()
    return {"form_s": form_s, "leave_s": leave_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.group_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="1 s per round-trip rate instead of 5 s")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    seconds = 1.0 if args.short else 5.0
    broker = OurBroker(props={"offsets.topic.num.partitions": 50, "group.consumer.min.heartbeat.interval.ms": 1000,
                              "group.consumer.heartbeat.interval.ms": 1000}).start()
    try:
        create_topic(broker.bootstrap, "bench-offsets", 1)
        figures = round_trips(broker.bootstrap, "bench-offsets", seconds)
        for protocol in ("classic", "cooperative", "consumer"):
            create_topic(broker.bootstrap, f"bench-group-{protocol}", 10)
            measured = rebalance(broker.bootstrap, f"bench-group-{protocol}", 10, protocol)
            figures.update({k if protocol == "classic" else f"{protocol}_{k}": v for k, v in measured.items()})
    finally:
        broker.stop()
    base = figures["metadata_rt_s"]
    print("| measure | value | vs Metadata |")
    print("|---|---:|---:|")
    for key, label in (("metadata_rt_s", "Metadata round trips/s"), ("offset_commit_rt_s", "OffsetCommit round trips/s"),
                       ("offset_fetch_rt_s", "OffsetFetch round trips/s")):
        print(f"| {label} | {figures[key]:,.0f} | {figures[key] / base:.2f} |")
    print(f"| 10-member group formed (s) | {figures['form_s']:.2f} | |")
    print(f"| rebalance after one member leaves, 10 -> 9 (s) | {figures['leave_s']:.2f} | |")
    for protocol, label in (("cooperative", "cooperative-sticky"), ("consumer", "consumer protocol, KIP-848")):
        print(f"| 10-member group formed, {label} (s) | {figures[f'{protocol}_form_s']:.2f} | "
              f"{figures[f'{protocol}_form_s'] / figures['form_s']:.2f}x eager |")
        print(f"| rebalance after one member leaves, {label} (s) | {figures[f'{protocol}_leave_s']:.2f} | "
              f"{figures[f'{protocol}_leave_s'] / figures['leave_s']:.2f}x eager |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
