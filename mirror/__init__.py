"""The mirror-maker: copies topics and consumer group offsets between
Kafka-compatible clusters (``python -m mirror --config FILE``, ``kafka-mirror``).

Modules: :mod:`~mirror.config` (the YAML file), :mod:`~mirror.flow` (one
source -> target flow: ownership, copying, progress), :mod:`~mirror.position`
(the provenance header and reading the target), :mod:`~mirror.topics` (topic
creation, partitions, configs), :mod:`~mirror.groups` (offset translation),
:mod:`~mirror.metrics`. Built on our client (:mod:`broker.client`) only.

Exactly once without transactions on the target
-----------------------------------------------
Every copied record carries the header ``kafkapy.mirror`` = ``ORIGIN|SOURCE|OFFSET``
(see :mod:`mirror.position`); the target partition is the checkpoint.

1. One writer per target partition and flow: the flow's processes share the
   source partitions through a consumer group on the source
   (``kafkapy-mirror.SOURCE.TARGET``), and source partition P is copied into
   target partition P only by its owner.
2. The owner sends one Produce request at a time per partition (one batch,
   which the broker appends whole or not at all) and sends the next only after
   the previous one was acknowledged. A failed request (lost connection,
   timeout, error) may or may not have been appended; the owner sends nothing
   more for that partition until it has read the target again.
3. Taking a partition (at start, after a rebalance, after a failed request),
   the owner reads the target partition from the target offset its last
   commit recorded (or from the log start) to the high watermark and resumes
   right after the last record whose header names this flow's source: nothing
   is copied twice and nothing is skipped. Commits are only a hint where to
   start reading; a SIGKILL between a write and its commit loses nothing.
4. Handing over: a partition moves to another process only through a group
   rebalance. A live owner gives it up in ``on_revoke``, when none of its
   requests is in flight (copies are awaited before the next poll). A killed
   owner keeps its partitions until its session times out
   (``session.timeout.ms``, 10 s by default); only then does the new owner read
   the tail.

What this assumes:

* A Produce request sent by a process that died is appended, or dropped, by
  the target within ``session.timeout.ms`` of the death (the kernel closes the
  dead process's connections at once; a broker answers a request in
  milliseconds, but a disk stalled for longer than the session timeout could
  append a dead owner's last batch after the new owner read the tail).
* A live owner that cannot hear from the source's group coordinator (a
  network partition, a long pause) stops writing once its membership has not
  been confirmed for half of ``session.timeout.ms``, before the coordinator
  can give its partitions away; a Produce request already sent must be
  answered within the other half, so keep the target's ``request.timeout.ms``
  below half the session timeout where this matters (the default 30 s is
  longer: a request stuck that long in a target broker is the remaining risk).
* Nothing else writes copies from the same source into the target partition
  (another mirror setup with the same cluster names), and the target
  partition is not truncated below the last copy while the mirror is down
  (then the last commit is the position and what was truncated is gone).
* The broker does not need idempotent producers or transactions, and does not
  check producer sequences: the batches are written without a producer id.

Active-active
-------------
A record whose header's ORIGIN is the flow's target cluster is not copied
(it came from there); ORIGIN is kept when a record travels on, so chains of
flows do not loop either. With ``topic.rename: "{source}.{topic}"`` the
source's topics named after the target (``dc2.orders`` in dc1, for the flow
dc1 -> dc2) are not selected at all.

Records are copied as they are (partition, key, value, headers, timestamp),
with the provenance header added; the batches are rebuilt, compressed with the
target cluster's ``compression.type`` (default none).
"""
