"""The history checker: what the producers were told against what a consumer read.

In the spirit of Jepsen's Kafka checkers. Inputs:

- ``acknowledged``: ``(partition, offset, value)`` for every send the broker
  acknowledged (the offset is the one in the acknowledgement);
- ``indeterminate``: the values whose send failed or timed out. A failed send
  may still have been written (the leader appended it, then the answer was
  lost), so such a value may be read or not, and either is fine;
- ``reads``: a consumer's full read, ``(partition, offset, value)`` in the order
  the consumer returned them; or a mapping ``name -> read`` for several
  consumers (each replica read on its own, say).

Values are any hashable (bytes from a client); every value a test sends must be
unique, which is what makes a history checkable.

Anomalies reported (:class:`Report`):

- ``lost``: acknowledged, and read by no consumer at any offset;
- ``divergent``: one ``(partition, offset)`` with two values, among the
  acknowledgements and the reads together (two reads disagreeing, two
  acknowledgements of one offset, or an acknowledged offset read with another
  value: a write acknowledged and later overwritten by truncation);
- ``moved``: acknowledged at one offset, read only at others;
- ``duplicates``: one value read at more than one ``(partition, offset)`` (a
  producer retry without idempotence writes it twice; counted, and a failure
  only when the caller says so);
- ``non_monotonic``: within one consumer's read of a partition, an offset not
  above the one before it;
- ``unexpected``: a value read that no producer sent (neither acknowledged nor
  indeterminate).

``check(...)`` returns the report; ``report.valid(allow_duplicates=...)`` says
whether it holds, ``str(report)`` lists the anomalies (the first few of each
kind) for an assertion message.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Mapping

Triple = tuple[int, int, Hashable]
SHOWN = 10  # anomalies of one kind shown in a message


@dataclass
class Report:
    acknowledged: int = 0
    indeterminate: int = 0
    read: int = 0
    lost: list[Triple] = field(default_factory=list)
    divergent: dict[tuple[int, int], set] = field(default_factory=dict)
    moved: dict[Hashable, tuple[tuple[int, int], list[tuple[int, int]]]] = field(default_factory=dict)
    duplicates: dict[Hashable, list[tuple[int, int]]] = field(default_factory=dict)
    non_monotonic: list[tuple[str, int, int, int]] = field(default_factory=list)  # (reader, partition, before, after)
    unexpected: list[Triple] = field(default_factory=list)

    def valid(self, allow_duplicates: bool = False) -> bool:
        return not (self.lost or self.divergent or self.moved or self.non_monotonic or self.unexpected
                    or (self.duplicates and not allow_duplicates))

    def __str__(self) -> str:
        lines = [f"{self.acknowledged} acknowledged, {self.indeterminate} indeterminate, {self.read} read"]
        for name, found in (("lost", self.lost), ("divergent", self.divergent), ("moved", self.moved),
                            ("duplicates", self.duplicates), ("non_monotonic", self.non_monotonic),
                            ("unexpected", self.unexpected)):
            if found:
                items = list(found.items()) if isinstance(found, dict) else list(found)
                shown = ", ".join(repr(i) for i in items[:SHOWN])
                lines.append(f"{name}: {len(items)}: {shown}{' ...' if len(items) > SHOWN else ''}")
        return "\n".join(lines)


def check(acknowledged: Iterable[Triple], reads: Iterable[Triple] | Mapping[str, Iterable[Triple]],
          indeterminate: Iterable[Hashable] = ()) -> Report:
    """Check a history (see the module docstring)."""
    acknowledged = list(acknowledged)
    indeterminate = set(indeterminate)
    by_reader = {name: list(r) for name, r in reads.items()} if isinstance(reads, Mapping) else {"read": list(reads)}
    report = Report(acknowledged=len(acknowledged), indeterminate=len(indeterminate),
                    read=sum(len(r) for r in by_reader.values()))

    at: dict[tuple[int, int], set] = defaultdict(set)  # (partition, offset) -> values seen or acknowledged there
    read_at: dict[Hashable, set[tuple[int, int]]] = defaultdict(set)  # value -> where it was read
    for name, read in by_reader.items():
        last: dict[int, int] = {}
        for partition, offset, value in read:
            if partition in last and offset <= last[partition]:
                report.non_monotonic.append((name, partition, last[partition], offset))
            last[partition] = offset
            at[(partition, offset)].add(value)
            read_at[value].add((partition, offset))

    sent = set(indeterminate)
    for partition, offset, value in acknowledged:
        sent.add(value)
        at[(partition, offset)].add(value)
        where = read_at.get(value)
        if not where:
            report.lost.append((partition, offset, value))
        elif (partition, offset) not in where:
            report.moved[value] = ((partition, offset), sorted(where))

    report.divergent = {place: values for place, values in sorted(at.items()) if len(values) > 1}
    report.duplicates = {value: sorted(where) for value, where in read_at.items() if len(where) > 1}
    report.unexpected = sorted((p, o, v) for v, where in read_at.items() if v not in sent for p, o in where)
    return report


class Recorder:
    """Collects a producer's history from delivery reports (confluent-kafka's ``on_delivery``).

    ``recorder.on_delivery(err, msg)`` files the message as acknowledged
    ``(partition, offset, value)`` or, on any error, as indeterminate; errors
    are counted by name in ``errors``. Thread-safe enough for librdkafka, which
    calls it from the thread that polls.
    """

    def __init__(self) -> None:
        self.acknowledged: list[Triple] = []
        self.indeterminate: set = set()
        self.errors: dict[str, int] = defaultdict(int)

    def on_delivery(self, err, msg) -> None:
        if err is None:
            self.acknowledged.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.indeterminate.add(msg.value())
            self.errors[err.name() if hasattr(err, "name") else str(err)] += 1

    def check(self, reads, extra_indeterminate: Iterable[Hashable] = ()) -> Report:
        return check(self.acknowledged, reads, self.indeterminate | set(extra_indeterminate))
