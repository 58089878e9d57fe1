"""The options of Spark's Kafka source, read into an offset-range plan.

Options are Spark's, with Spark's meanings (names are case-insensitive, as
Spark passes them):

- ``kafka.<property>``: a client property (``kafka.bootstrap.servers`` is
  required); unknown properties fail with the client's one-line error.
- exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern``
  (a regex matched in full against topic names) or ``assign``
  (JSON ``{"topicA":[0,1],"topicB":[2]}``).
- ``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or JSON
  ``{"topicA":{"0":23,"1":-1}}`` where -2 is earliest and -1 latest (-2 is
  refused as an ending offset, a starting -1 is refused nowhere).
  ``startingTimestamp`` (one time for every partition) and
  ``startingOffsetsByTimestamp`` (JSON of times per partition) take
  precedence, ms since the epoch; a partition with no record at or after the
  time fails the query unless ``startingOffsetsByTimestampStrategy=latest``.
- ``minPartitions``: split offset ranges so there are at least this many.
- ``failOnDataLoss`` (default true): a starting offset below the log start
  offset (records gone to retention) fails the query; with ``false`` the gap is
  logged and reading starts at the log start offset.
- ``includeHeaders`` (default false), ``maxOffsetsPerTrigger`` (streaming),
  ``groupIdCommit`` or ``kafka.group.id``: the group the reader commits to.

An offset range is ``(topic, partition, start, end)`` with ``end`` exclusive.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

from broker.client import Admin, TopicPartition
from broker.client.errors import UnknownTopicOrPartitionError

log = logging.getLogger("pipeline")

EARLIEST, LATEST = -2, -1


class OptionError(ValueError):
    """An option the source cannot use; the message is one line and names it."""


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start


def _lower(options) -> dict[str, str]:
    return {k.lower(): v for k, v in dict(options).items()}


def client_config(options) -> dict[str, str]:
    """The ``kafka.*`` options as the client's dotted-name mapping (group.id left out)."""
    opts = _lower(options)
    conf = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.") and k != "kafka.group.id"}
    if "bootstrap.servers" not in conf:
        raise OptionError("option kafka.bootstrap.servers is required")
    return conf


def group_id(options) -> str | None:
    opts = _lower(options)
    return opts.get("groupidcommit") or opts.get("kafka.group.id") or None


def flag(options, name: str, default: bool) -> bool:
    value = _lower(options).get(name.lower())
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, not {value!r}")
    return value.lower() == "true"


def int_option(options, name: str) -> int | None:
    value = _lower(options).get(name.lower())
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise OptionError(f"option {name} must be a positive integer, not {value!r}") from None
    if n <= 0:
        raise OptionError(f"option {name} must be a positive integer, not {value!r}")
    return n


def _json(options, name: str):
    text = _lower(options)[name.lower()]
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} is not valid JSON ({exc.msg}): {text!r}") from None


def topic_partitions(options, admin: Admin) -> list[TopicPartition]:
    """The partitions that ``subscribe``, ``subscribePattern`` or ``assign`` select."""
    opts = _lower(options)
    given = [n for n in ("subscribe", "subscribepattern", "assign") if n in opts]
    if len(given) != 1:
        raise OptionError("exactly one of the options subscribe, subscribePattern, assign is required")
    if given[0] == "assign":
        spec = _json(options, "assign")
        if not isinstance(spec, dict):
            raise OptionError('option assign must be JSON like {"topicA":[0,1]}')
        return sorted(TopicPartition(t, int(p)) for t, ps in spec.items() for p in ps)
    if given[0] == "subscribe":
        topics = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
        if not topics:
            raise OptionError("option subscribe names no topic")
    else:
        try:
            pattern = re.compile(opts["subscribepattern"])
        except re.error as exc:
            raise OptionError(f"option subscribePattern is not a valid regex: {exc}") from None
        topics = [t for t in admin.list_topics() if pattern.fullmatch(t)]
    described = {}
    for t in topics:
        try:
            described.update(admin.describe_topics([t]))
        except UnknownTopicOrPartitionError:
            raise OptionError(f"topic {t!r} does not exist") from None
    out = []
    for t in topics:
        md = described[t]
        out.extend(TopicPartition(t, p) for p in md.partitions)
    return sorted(out)


def _offsets_spec(options, name: str, default: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """``{tp: offset or EARLIEST/LATEST}`` from an ``earliest``/``latest``/JSON option."""
    text = _lower(options).get(name.lower(), default).strip()
    if text.lower() in ("earliest", "latest"):
        return dict.fromkeys(tps, EARLIEST if text.lower() == "earliest" else LATEST)
    spec = _json(options, name)
    out = {}
    for t, parts in spec.items():
        for p, off in parts.items():
            tp = TopicPartition(t, int(p))
            if tp not in tps:
                raise OptionError(f"option {name} names {t}-{p}, which is not among the partitions read")
            out[tp] = int(off)
    missing = [tp for tp in tps if tp not in out]
    if missing and name.lower() == "startingoffsets":
        # Spark's rule: a JSON starting spec must cover every partition it reads
        raise OptionError(f"option {name} does not give an offset for {missing[0].topic}-{missing[0].partition}")
    return {tp: out.get(tp, LATEST) for tp in tps}


def starting_offsets(options, admin: Admin, tps: list[TopicPartition], default: str = "earliest"
                     ) -> dict[TopicPartition, int]:
    """Resolved starting offsets (timestamps first, then ``startingOffsets``)."""
    opts = _lower(options)
    if "startingtimestamp" in opts or "startingoffsetsbytimestamp" in opts:
        if "startingtimestamp" in opts:
            ts = dict.fromkeys(tps, int(opts["startingtimestamp"]))
        else:
            ts = {TopicPartition(t, int(p)): int(v)
                  for t, ps in _json(options, "startingOffsetsByTimestamp").items() for p, v in ps.items()}
        found = admin.list_offsets(ts)
        strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
        latest = admin.list_offsets(dict.fromkeys(ts, LATEST))
        out = {}
        for tp, (offset, _) in found.items():
            if offset < 0:
                if strategy != "latest":
                    raise OptionError(f"no record in {tp.topic}-{tp.partition} at or after timestamp {ts[tp]} "
                                      f"(startingOffsetsByTimestampStrategy=latest starts at the end instead)")
                offset = latest[tp][0]
            out[tp] = offset
        return out
    return resolve(_offsets_spec(options, "startingOffsets", default, tps), admin)


def ending_offsets(options, admin: Admin, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    spec = _offsets_spec(options, "endingOffsets", "latest", tps)
    if any(v == EARLIEST for v in spec.values()):
        raise OptionError("option endingOffsets may not use earliest (-2)")
    return resolve(spec, admin)


def resolve(spec: dict[TopicPartition, int], admin: Admin) -> dict[TopicPartition, int]:
    symbolic = {tp: v for tp, v in spec.items() if v in (EARLIEST, LATEST)}
    resolved = {tp: off for tp, (off, _) in admin.list_offsets(symbolic).items()} if symbolic else {}
    return {tp: resolved.get(tp, v) for tp, v in spec.items()}


def check_data_loss(start: dict[TopicPartition, int], admin: Admin, fail_on_data_loss: bool
                    ) -> dict[TopicPartition, int]:
    """Starting offsets moved up to the log start offset where records are gone (or an error)."""
    log_start = {tp: off for tp, (off, _) in admin.list_offsets(dict.fromkeys(start, EARLIEST)).items()}
    out = dict(start)
    for tp, off in start.items():
        if off < log_start[tp]:
            msg = (f"{tp.topic}-{tp.partition}: offsets {off} to {log_start[tp] - 1} are gone "
                   f"(log start offset {log_start[tp]}), some data may have been lost")
            if fail_on_data_loss:
                raise OptionError(msg + "; set failOnDataLoss=false to skip them")
            log.warning("%s; skipped (failOnDataLoss=false)", msg)
            out[tp] = log_start[tp]
    return out


def plan(start: dict[TopicPartition, int], end: dict[TopicPartition, int], min_partitions: int | None
         ) -> list[OffsetRange]:
    """Offset ranges, one per partition, big ones split so there are at least ``min_partitions``."""
    ranges = [OffsetRange(tp.topic, tp.partition, start[tp], max(start[tp], end[tp])) for tp in sorted(start)]
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    if not min_partitions or len(ranges) >= min_partitions or total == 0:
        return ranges
    out = []
    for r in ranges:
        # each partition gets a share of the parts proportional to its size, at least one
        parts = max(1, min(r.size, round(min_partitions * r.size / total)))
        step, extra = divmod(r.size, parts)
        pos = r.start
        for i in range(parts):
            n = step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, pos, pos + n))
            pos += n
    return out
