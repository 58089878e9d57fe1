"""The transaction coordinator over ``__transaction_state`` (Kafka 2.7's).

    state.py         the transaction state machine (states, allowed transitions, TransactionMetadata)
    records.py       key/value layouts of ``__transaction_state`` (Kafka's), the id -> partition hash,
                     ``decode_transaction_log_record`` for ``kafkactl log dump --transaction-log-decoder``
    storage.py       create / append to / replay the ``__transaction_state`` partitions
    markers.py       COMMIT/ABORT control batches written into a transaction's partitions led here
    marker_channel.py  markers sent to every partition's current leader (WriteTxnMarkers, per broker queues)
    producer_ids.py  producer ids from blocks claimed in the metadata store
    coordinator.py   TransactionCoordinator: InitProducerId, AddPartitionsToTxn, EndTxn, timeouts, expiry
"""

from broker.txn.coordinator import TransactionCoordinator
from broker.txn.producer_ids import ProducerIdManager
from broker.txn.records import decode_transaction_log_record, partition_for
from broker.txn.state import TransactionMetadata, TransactionState

__all__ = ["TransactionCoordinator", "ProducerIdManager", "TransactionMetadata", "TransactionState",
           "decode_transaction_log_record", "partition_for"]
