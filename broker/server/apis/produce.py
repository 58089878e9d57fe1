"""Produce (key 0), versions 0-11 (v9 is the first flexible version).

Each partition's records are checked on the loop, then appended through the
replica layer (:class:`~broker.replica.ReplicaManager`), which queues them for
the writer thread of the partition's log dir (:class:`~broker.log.LogAppender`); the
handler waits for all of them together, so the loop never waits on a disk and
the partitions of one request are written in parallel across disks. A request
with a single small append (under ``PROMPT_MAX_BYTES``, acks 1 or all) whose
writer was idle waits for it on the loop for at most ``PROMPT_WAIT_S`` and is
then usually answered in the same pass of the loop
(:mod:`broker.replica.handback`: the low-rate latency). The log
verifies every batch's CRC-32C and size and patches ``baseOffset`` and
``partitionLeaderEpoch`` in place (no record is decoded on this path, except
for compacted topics, whose records must all have keys). Errors are per
partition and never fail the whole request:

* acks not in {0, 1, -1}                          INVALID_REQUIRED_ACKS (21), every partition
* unknown topic/partition (after auto-create)     UNKNOWN_TOPIC_OR_PARTITION (3)
* this broker does not lead the partition         NOT_LEADER_OR_FOLLOWER (6)
* illegal topic name / internal topic             INVALID_TOPIC_EXCEPTION (17)
* bad CRC, truncated or malformed batch           CORRUPT_MESSAGE (2)
* batch above max.message.bytes                   MESSAGE_TOO_LARGE (10)
* v3+ with a legacy message set or >1 batch       INVALID_RECORD (87)
* a keyless record on a compacted topic           INVALID_RECORD (87), per record
* a control batch, or a producer id without a     INVALID_RECORD (87)
  sequence (Kafka's LogValidator)
* a sequence that does not follow the producer's  OUT_OF_ORDER_SEQUENCE_NUMBER (45)
  last one (or a new epoch not starting at 0)
* a producer epoch older than the partition's     INVALID_PRODUCER_EPOCH (47)
* a non-transactional batch during the producer's INVALID_TXN_STATE (48)
  ongoing transaction
* zstd before v7                                  UNSUPPORTED_COMPRESSION_TYPE (76)
* a record's CreateTime further than message.     INVALID_TIMESTAMP (32), per record
  timestamp.difference.max.ms from the broker clock
* acks=-1 with ISR below min.insync.replicas      NOT_ENOUGH_REPLICAS (19)
* the partition's log closed meanwhile            NOT_LEADER_OR_FOLLOWER (6)
* acks=-1 and the high watermark did not pass     REQUEST_TIMED_OUT (7)
  the append within ``timeout_ms``
* acks=-1 and this broker stopped leading the     NOT_LEADER_OR_FOLLOWER (6)
  partition while the append waited
* acks=-1 and the ISR shrank below                NOT_ENOUGH_REPLICAS_AFTER_APPEND (20)
  min.insync.replicas while the append waited
* the write failed (disk error, disk full)        KAFKA_STORAGE_ERROR (56)

From v10 (KIP-951) a partition answered NOT_LEADER_OR_FOLLOWER carries its ``current_leader`` (leader id and
epoch, as this broker knows them) and the response the ``node_endpoints`` of those leaders, so the producer
sends there at once instead of asking for metadata first (:class:`~broker.server.apis._common.LeaderHints`).
v11 (KIP-890) only says the producer understands TRANSACTION_ABORTABLE, which this broker never answers (it
does not verify transactions on produce).

A batch of an idempotent producer that repeats one of the producer's last
five batches (a retry whose first answer was lost) is not written again: it is
answered with the offset of its first write (see
:mod:`broker.log.producer_state`, whose checks run on the log's writer thread,
in append order).

Client quotas (:mod:`broker.server.quotas`): the network layer counts the
request's bytes against the client's ``producer_byte_rate`` once it is
answered; a throttled producer's data is written all the same (Kafka does not
refuse it, it slows the client down).

Once every partition's append is queued the handler says so
(``ctx.appends_queued()``): a later Produce on the same connection may then
start while this one waits, since each writer appends in queue order; any
other request waits for this one's answer (see :mod:`broker.server.network`).

The per-record checks are Kafka's LogValidator's (KIP-467): a bad record fails
its whole batch, and from v8 the answer lists each bad record
(``record_errors``: its index in the batch and why) with an ``error_message``,
so a client can tell the bad records from the innocent ones. They decode
the batch, so only compacted topics and topics that set
``message.timestamp.difference.max.ms`` pay for them.

Versions 0-2 carry legacy message sets (magic 0/1): they are up-converted to
RecordBatch v2 before the append, so the log holds only v2. LogAppendTime
topics get the broker's time written into each batch (``log_append_time_ms``
in the response, v2+). acks=-1 is answered once the high watermark has passed
the append (it waits in the replica layer's purgatory until the ISR's
followers have fetched it; on a single node it has when the append is written),
or at once with an error when this broker stops leading the partition meanwhile
(NOT_LEADER_OR_FOLLOWER; KAFKA_STORAGE_ERROR if its log dir failed). acks=0
gets no response; if one of its partitions failed, the connection is closed
instead, as Kafka does, so the producer notices. Topics are auto-created when
``auto.create.topics.enable`` is set.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleProduceRequest``), decided before anything is appended:

* a request whose first batch of some partition is transactional needs WRITE
  on its ``transactional_id`` (a null id is refused too), else every
  partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53);
* else one with a producer id (idempotent) needs IDEMPOTENT_WRITE on the
  cluster, else every partition gets CLUSTER_AUTHORIZATION_FAILED (31);
* each topic needs WRITE, else its partitions get TOPIC_AUTHORIZATION_FAILED
  (29), before any other check of that topic;
* auto-creating a topic needs CREATE on the cluster or on the topic, else the
  topic is UNKNOWN_TOPIC_OR_PARTITION (Kafka's Produce never creates one).

(acks=0: the connection is closed instead.) The cost: one attribute test per
request without an authorizer; with one, one decision per topic (and a look
at the first batch header of each partition), never one per partition.
"""

from __future__ import annotations

import time

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.log import CorruptRecordError, LogError
from broker.protocol import ApiKey, ErrorCode, error_name
from broker.records import UnsupportedCompressionTypeError, decode_batch, upconvert_to_v2
from broker.records.view import (COMPRESSION_MASK, CONTROL_MASK, LOG_OVERHEAD, MAGIC_OFFSET, TRANSACTIONAL_MASK,
                                 V2_APPEND_FIELDS, V2_APPEND_PRODUCER_FIELDS, V2_ATTRIBUTES_OFFSET, V2_HEADER_SIZE)
from broker.replica.handback import PROMPT_MAX_BYTES, PROMPT_WAIT_S
from broker.server.apis._common import LeaderHints
from broker.server.context import CloseConnection, RequestContext
from broker.server.topics import INTERNAL_TOPICS, TopicError, TopicInfo, validate_topic_name

ZSTD = 4
LONG_MAX = (1 << 63) - 1


class _PartitionError(Exception):
    def __init__(self, error_code: int, message: str | None = None,
                 record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message or "")
        self.error_code = int(error_code)
        self.message = message
        self.record_errors = record_errors or []  # (index of the record in its batch, why)


def _entries(mv: memoryview):
    """(position, size, magic) of each top-level entry; CORRUPT_MESSAGE if sizes do not add up."""
    pos, n = 0, len(mv)
    out = []
    while pos < n:
        if n - pos < MAGIC_OFFSET + 1:
            raise _PartitionError(ErrorCode.CORRUPT_MESSAGE, "records end inside an entry header")
        size = LOG_OVERHEAD + int.from_bytes(mv[pos + 8:pos + 12], "big", signed=True)
        if size <= LOG_OVERHEAD or pos + size > n:
            raise _PartitionError(ErrorCode.CORRUPT_MESSAGE, f"entry at {pos} claims {size} bytes")
        out.append((pos, size, mv[pos + MAGIC_OFFSET]))
        pos += size
    return out


def _prepare(version: int, records, config, topic: str, partition: int) -> memoryview | bytes:
    """Check the request-level rules and return v2 batches ready for the log."""
    if records is None or len(records) == 0:
        raise _PartitionError(ErrorCode.CORRUPT_MESSAGE, "no records")
    mv = records if isinstance(records, memoryview) else memoryview(records)
    check_ts = config.message_timestamp_type == "CreateTime" and config.message_timestamp_difference_max_ms < LONG_MAX
    n = len(mv)
    if version >= 3 and n >= V2_HEADER_SIZE:
        # What every current client sends: one v2 batch filling the buffer, told from its header
        # alone; everything else takes the general path below.
        _bo, length, _ple, magic, _crc, _lod, _mts, _count = V2_APPEND_FIELDS.unpack_from(mv)
        if LOG_OVERHEAD + length == n and magic == 2:
            _check_batch(version, mv, 0, n, config, check_ts, topic, partition)
            return mv
    entries = _entries(mv)
    magics = {magic for _p, _s, magic in entries}
    if version >= 3:
        if magics != {2}:
            raise _PartitionError(ErrorCode.INVALID_RECORD,
                                  "produce v3+ must carry record batches with magic 2")
        if len(entries) != 1:
            raise _PartitionError(ErrorCode.INVALID_RECORD, "produce v3+ must carry exactly one record batch")
    if magics - {0, 1, 2}:
        raise _PartitionError(ErrorCode.CORRUPT_MESSAGE, f"unknown magic {sorted(magics)}")
    if 2 not in magics:
        try:
            mv = memoryview(upconvert_to_v2(bytes(mv)))
        except UnsupportedCompressionTypeError as exc:
            raise _PartitionError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc)) from None
        except (CorruptRecordError, ValueError) as exc:
            raise _PartitionError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        entries = _entries(mv)
    elif magics != {2}:
        raise _PartitionError(ErrorCode.CORRUPT_MESSAGE, "mixed message formats in one request")
    for pos, size, _magic in entries:
        if size < V2_HEADER_SIZE:
            raise _PartitionError(ErrorCode.CORRUPT_MESSAGE, f"batch of {size} bytes is smaller than its header")
        _check_batch(version, mv, pos, size, config, check_ts, topic, partition)
    return mv


def _check_batch(version: int, mv: memoryview, pos: int, size: int, config, check_ts: bool, topic: str,
                 partition: int) -> None:
    """Kafka's LogValidator checks of the v2 batch at ``mv[pos:pos + size]``: no control batch, a
    sequence with a producer id, no zstd before v7 (from its header), then the per-record checks
    where the topic's config asks for them."""
    attributes, producer_id, _epoch, base_sequence = V2_APPEND_PRODUCER_FIELDS.unpack_from(
        mv, pos + V2_ATTRIBUTES_OFFSET)
    if attributes & CONTROL_MASK:
        raise _PartitionError(ErrorCode.INVALID_RECORD,
                              f"Clients are not allowed to write control records in {topic}-{partition}")
    if producer_id >= 0 and base_sequence < 0:
        raise _PartitionError(ErrorCode.INVALID_RECORD, f"Invalid sequence number {base_sequence} in "
                                                        f"record batch with producerId {producer_id}")
    if attributes & COMPRESSION_MASK == ZSTD and version < 7:
        raise _PartitionError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs produce v7+")
    if config.compact or check_ts:
        _check_records(mv[pos:pos + size], config, check_ts, f"{topic}-{partition}")


def _check_records(entry: memoryview, config, check_ts: bool, tp: str) -> None:
    """Kafka's per-record checks (LogValidator.validateRecord), which decode the batch.

    Each record gets at most one error: no key on a compacted topic, else a
    CreateTime timestamp (other than -1, none) further than
    ``message.timestamp.difference.max.ms`` from the broker's clock. One bad
    record fails the whole batch; the answer names every bad record (KIP-467):
    INVALID_TIMESTAMP if any timestamp was bad, else INVALID_RECORD.
    """
    try:
        batch = decode_batch(entry)
    except UnsupportedCompressionTypeError as exc:
        raise _PartitionError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc)) from None
    except (CorruptRecordError, ValueError) as exc:
        raise _PartitionError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if batch.is_control:
        return
    limit = config.message_timestamp_difference_max_ms
    now = int(time.time() * 1000)
    errors = []
    bad_timestamp = False
    for index, record in enumerate(batch.records):
        if config.compact and record.key is None:
            errors.append((index, f"Compacted topic cannot accept message without key in topic partition {tp}."))
            continue
        if check_ts:
            ts = batch.timestamp_of(record)
            if ts != -1 and abs(ts - now) > limit:
                bad_timestamp = True
                errors.append((index, f"Timestamp {ts} of message with offset {batch.offset_of(record)} is out of "
                                      f"range. The timestamp should be within [{now - limit}, {now + limit}]"))
    if bad_timestamp:
        raise _PartitionError(ErrorCode.INVALID_TIMESTAMP,
                              "One or more records have been rejected due to invalid timestamp", errors)
    if errors:
        raise _PartitionError(ErrorCode.INVALID_RECORD, "One or more records have been rejected", errors)


async def _unusable_topic(ctx: RequestContext, name: str, info: TopicInfo | None) -> TopicInfo:
    """A topic not found (``info`` None: auto-created if allowed) or internal: the topic, or TopicError."""
    if info is not None:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot append to internal topic {name}")
    validate_topic_name(name)
    if (not ctx.broker.config.auto_create_topics_enable or name in INTERNAL_TOPICS
            or not (ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                    or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name))):
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name}")
    return await ctx.broker.topics.auto_create(name)


def _producer_kind(request: dict) -> tuple[bool, bool]:
    """(transactional, idempotent) as Kafka's ProduceRequest tells them: from the first batch header of
    each partition's records (a v2 batch with the transactional bit, or with a producer id)."""
    idempotent = False
    for topic_data in request["topic_data"]:
        for pd in topic_data["partition_data"]:
            records = pd["records"]
            if records is None or len(records) < V2_HEADER_SIZE or records[MAGIC_OFFSET] != 2:
                continue
            attributes, producer_id, _epoch, _sequence = V2_APPEND_PRODUCER_FIELDS.unpack_from(
                records, V2_ATTRIBUTES_OFFSET)
            if attributes & TRANSACTIONAL_MASK:
                return True, True
            if producer_id >= 0:
                idempotent = True
    return False, idempotent


def _authorize(ctx: RequestContext, request: dict) -> tuple[int, set[str]]:
    """With an authorizer: (an error for the whole request or NONE, the topics without WRITE)."""
    transactional, idempotent = _producer_kind(request)
    if transactional:
        transactional_id = request.get("transactional_id")
        if transactional_id is None or not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                         transactional_id):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, set()
    elif idempotent and not ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, set()
    names = {topic_data["name"] for topic_data in request["topic_data"]}
    return ErrorCode.NONE, names - ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, names)


def _refuse_all(ctx: RequestContext, request: dict, code: int) -> dict | None:
    """Kafka's error response to a whole Produce refused: every partition gets ``code`` (acks=0: closed)."""
    ctx.appends_queued()
    responses = []
    for topic_data in request["topic_data"]:
        partitions = [{"index": pd["index"], "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
                       "log_start_offset": -1, "record_errors": [], "error_message": None}
                      for pd in topic_data["partition_data"]]
        ctx.broker.metrics.produce_errors.labels(error_name(code)).inc(len(partitions))
        responses.append({"name": topic_data["name"], "partition_responses": partitions})
    if request["acks"] == 0:
        raise CloseConnection(f"acks=0 produce refused ({error_name(code)}); closing so the producer notices")
    return {"responses": responses, "throttle_time_ms": 0}


def _replication_error(partition, replicas) -> _PartitionError | None:
    """acks=all once the high watermark passed the append: the error if the ISR no longer vouches for it
    (Kafka's ``checkEnoughReplicasReachOffset``), or if the partition is no longer served here (its log
    dir failed: KAFKA_STORAGE_ERROR; its topic deleted)."""
    if not partition.served:
        code = replicas.missing_error(partition.topic, partition.partition)
        return _PartitionError(code, f"{partition.topic}-{partition.partition} is no longer served here "
                                     f"({error_name(code)})")
    if not partition.is_leader:
        return _PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                               f"this broker stopped leading {partition.topic}-{partition.partition}")
    if len(partition.isr) < partition.config.min_insync_replicas:
        return _PartitionError(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                               f"the ISR {partition.isr} shrank below min.insync.replicas while the append waited")
    return None


async def handle(ctx: RequestContext, request: dict) -> dict | None:
    broker = ctx.broker
    replicas = broker.replicas
    loop = broker.loop
    metrics = broker.metrics
    topics = broker.topics
    version = ctx.api_version
    acks = request["acks"]
    responses = []
    submitted = []  # (result dict, topic name, partition, future): every partition's append is queued first
    errors = []  # (result dict, topic name, _PartitionError)
    topic_data_list = request["topic_data"]
    unauthorized = None  # the topics without WRITE, with an authorizer (decided once per topic)
    if broker.authorizer is not None and ctx.connection is not None:
        refusal, unauthorized = _authorize(ctx, request)
        if refusal:
            return _refuse_all(ctx, request, refusal)
    # A lone small append may be waited for on the loop (broker.replica.handback): the answer then
    # goes out in this pass. Not with acks=0 (nobody waits for it) nor for several appends.
    wait_s = (PROMPT_WAIT_S if acks != 0 and len(topic_data_list) == 1
              and len(topic_data_list[0]["partition_data"]) == 1 else 0.0)
    for topic_data in topic_data_list:
        name = topic_data["name"]
        partitions = []
        topic_error = None
        if unauthorized and name in unauthorized:
            topic_error = TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)  # no message, as Kafka
        elif acks not in (0, 1, -1):
            topic_error = TopicError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not 0, 1 or -1")
        else:
            info = topics.get(name)
            if info is None or info.is_internal:
                try:
                    await _unusable_topic(ctx, name, info)
                except TopicError as exc:
                    topic_error = exc
        for pd in topic_data["partition_data"]:
            index = pd["index"]
            result = {"index": index, "error_code": ErrorCode.NONE, "base_offset": -1, "log_append_time_ms": -1,
                      "log_start_offset": -1, "record_errors": [], "error_message": None}
            partitions.append(result)
            try:
                if topic_error is not None:
                    raise _PartitionError(topic_error.error_code, topic_error.message)
                partition = replicas.partition(name, index)
                if partition is None:
                    code = replicas.missing_error(name, index)
                    raise _PartitionError(code, f"{name}-{index} is offline (its log dir failed)"
                                          if code == ErrorCode.KAFKA_STORAGE_ERROR else f"unknown partition {name}-{index}")
                if not partition.is_leader:
                    raise _PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                          f"broker {broker.broker_id} does not lead {name}-{index}")
                config = partition.config
                if acks == -1 and len(partition.isr) < config.min_insync_replicas:
                    raise _PartitionError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                          f"ISR {partition.isr} is smaller than min.insync.replicas")
                batches = _prepare(version, pd["records"], config, name, index)
            except _PartitionError as exc:
                errors.append((result, name, exc))
                continue
            fut = replicas.append_records(partition, batches, loop,
                                          wait_s=wait_s if len(batches) <= PROMPT_MAX_BYTES else 0.0)
            submitted.append((result, name, partition, fut))
        responses.append({"name": name, "partition_responses": partitions})
    ctx.appends_queued()
    timeout = max(request["timeout_ms"], 0) / 1000
    counted = ctx.produced = []  # (topic, bytes, records): the metrics count them once the answer is out
    try:
        for result, name, partition, fut in submitted:
            try:
                appended = await fut
            except (LogError, CorruptRecordError) as exc:
                errors.append((result, name, _PartitionError(exc.error_code, str(exc))))
                continue
            except Exception as exc:  # noqa: BLE001 - a bug in the append path: this partition fails, not the request
                errors.append((result, name, _PartitionError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                             f"append failed: {exc!r}")))
                continue
            if acks == -1:
                # a coroutine only when there is something to wait for (at low rates there rarely is)
                if (partition.high_watermark <= appended.last_offset and not await
                        replicas.wait_for_high_watermark(partition, appended.last_offset, timeout)):
                    error = _PartitionError(ErrorCode.REQUEST_TIMED_OUT,
                                            "the high watermark did not reach the append in time")
                else:
                    error = _replication_error(partition, replicas)
                if error is not None:
                    errors.append((result, name, error))
                    continue
            result.update(base_offset=appended.first_offset, log_append_time_ms=appended.log_append_time,
                          log_start_offset=appended.log_start_offset)
            counted.append((name, appended.valid_bytes, appended.num_records))
    finally:  # cancelled (the client went away): the appends still land; nobody waits for them
        for _result, _name, _partition, fut in submitted:
            if not fut.done():
                fut.cancel()
    hints = LeaderHints(ctx) if version >= 10 else None
    for result, name, exc in errors:
        result["error_code"] = exc.error_code
        result["error_message"] = exc.message
        result["record_errors"] = [{"batch_index": i, "batch_index_error_message": why}
                                   for i, why in exc.record_errors]
        if hints is not None and exc.error_code in LeaderHints.ERRORS:
            result["current_leader"] = hints.current_leader(name, result["index"])
        metrics.produce_errors.labels(error_name(exc.error_code)).inc()
    if acks == 0:
        if errors:
            raise CloseConnection("acks=0 produce failed; closing so the producer notices")
        return None
    answer = {"responses": responses, "throttle_time_ms": 0}
    if hints is not None and hints.leaders:
        answer["node_endpoints"] = hints.node_endpoints()
    return answer


def register(registry) -> None:
    registry.register(ApiKey.PRODUCE, 0, 11, handle)
