"""Kafka record formats, sans-I/O: RecordBatch v2, legacy message sets v0/v1,
compression codecs, control records, conversion between formats, and the
zero-copy :class:`BatchView` the broker uses on its hot path.
"""

from broker.records.batch import (
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchBuilder,
    Header,
    Record,
    RecordBatch,
    RecordEntry,
    TimestampType,
    decode_batch,
    decode_record,
    encode_batch,
    encode_record,
    iter_batches,
    iter_records,
    set_log_append_time,
)
from broker.records.compression import (
    Compression,
    CompressionError,
    UnsupportedCompressionTypeError,
    compress,
    compress_lz4_legacy,
    decompress,
)
from broker.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_txn_marker_batch,
    decode_control_key,
    decode_end_txn_marker_value,
    encode_control_key,
    encode_end_txn_marker_value,
    end_txn_marker_of,
)
from broker.records.convert import downconvert, upconvert_to_v2
from broker.records.fetched import FetchedBatch, iter_fetched
from broker.records.legacy import (
    LegacyMessage,
    decode_message,
    decode_message_set,
    encode_message,
    encode_message_set,
    iter_legacy_entries,
)
from broker.records.varint import decode_varint, decode_varlong, encode_varint, encode_varlong
from broker.records.view import (
    LOG_OVERHEAD,
    V2_HEADER_SIZE,
    BatchHeader,
    BatchView,
    CorruptRecordError,
    entry_size_at,
    iter_batch_views,
)

__all__ = [name for name in dir() if not name.startswith("_") and name not in {"batch", "compression", "control", "convert", "legacy", "varint", "view", "fetched"}]
