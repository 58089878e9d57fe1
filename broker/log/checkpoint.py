"""Checkpoint files in Apache Kafka's text formats, written atomically.

Offset checkpoints (``recovery-point-offset-checkpoint``,
``replication-offset-checkpoint``, ``log-start-offset-checkpoint``,
``cleaner-offset-checkpoint``), one per log dir::

    0                      <- version
    2                      <- number of entries
    my-topic 0 1234        <- topic partition offset
    my-topic 1 99

``leader-epoch-checkpoint``, one per partition dir: the same header, then
``epoch start_offset`` lines.

``meta.properties``, one per log dir: Java properties, ``version=0``,
``broker.id=N``, ``cluster.id=...``.

``partition.metadata``, one per partition dir (Kafka 2.8, KIP-516): the topic's
id, so that a log left behind by a deleted topic is never served as the log of
a new topic of the same name::

    version: 0
    topic_id: <22 characters: Kafka's text of the uuid>

Every write goes to ``<file>.tmp``, is fsynced, renamed over the file, and the
directory is fsynced, so a crash leaves either the old or the new file.
Readers treat a missing file as empty and a malformed one as an error naming
the file and line (``ValueError``). Functions here are stateless and thread-safe;
callers serialise writers of the same file.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Iterable, Mapping

from broker.topic_ids import format_topic_id, parse_topic_id

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"
CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]


def write_atomically(path: Path, data: bytes, *, fsync: bool = True) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make the entries of directory ``path`` (files made, renamed or removed in it) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_lines(path: Path) -> list[str] | None:
    try:
        text = Path(path).read_text("utf-8")
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    if len(lines) < 2:
        raise ValueError(f"{path}: truncated checkpoint (needs version and count lines)")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise ValueError(f"{path}:1: unsupported checkpoint version {lines[0].strip()!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise ValueError(f"{path}:2: bad entry count {lines[1]!r}") from None
    body = [ln for ln in lines[2:] if ln.strip()]
    if len(body) != count:
        raise ValueError(f"{path}: expected {count} entries, found {len(body)}")
    return body


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int], *, fsync: bool = True) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode("utf-8"), fsync=fsync)


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    body = _read_lines(path)
    out: dict[TopicPartition, int] = {}
    for i, line in enumerate(body or (), start=3):
        parts = line.split()
        if len(parts) != 3:
            raise ValueError(f"{path}:{i}: expected 'topic partition offset', got {line!r}")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise ValueError(f"{path}:{i}: bad numbers in {line!r}") from None
    return out


def write_epoch_checkpoint(path: Path, entries: Iterable[tuple[int, int]], *, fsync: bool = True) -> None:
    entries = list(entries)
    lines = [str(CHECKPOINT_VERSION), str(len(entries))] + [f"{e} {o}" for e, o in entries]
    write_atomically(path, ("\n".join(lines) + "\n").encode("utf-8"), fsync=fsync)


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    body = _read_lines(path)
    out = []
    for i, line in enumerate(body or (), start=3):
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"{path}:{i}: expected 'epoch start_offset', got {line!r}")
        out.append((int(parts[0]), int(parts[1])))
    return out


def write_meta_properties(log_dir: Path, *, broker_id: int, cluster_id: str | None, version: int = 0) -> None:
    lines = ["#", f"version={version}", f"broker.id={broker_id}"]
    if cluster_id is not None:
        lines.append(f"cluster.id={cluster_id}")
    write_atomically(Path(log_dir) / META_PROPERTIES, ("\n".join(lines) + "\n").encode("utf-8"))


def read_meta_properties(log_dir: Path) -> dict[str, str] | None:
    """The key/value pairs of ``meta.properties``, or None when the file does not exist."""
    try:
        text = (Path(log_dir) / META_PROPERTIES).read_text("utf-8")
    except FileNotFoundError:
        return None
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"{log_dir}/{META_PROPERTIES}: bad line {line!r}")
        out[key.strip()] = value.strip()
    return out


class LeaderEpochCache:
    """Leader epoch -> first offset written in that epoch, persisted in ``leader-epoch-checkpoint``.

    Entries are strictly increasing in both epoch and start offset. ``assign``
    is called on append when a batch carries a larger epoch; the truncate
    helpers are for log truncation and log start offset moves (replication).
    Not thread-safe: the owning Log calls it under its writer lock. Writes skip
    fsync (``flush`` does it) so appends stay fast.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.entries: list[tuple[int, int]] = read_epoch_checkpoint(self.path)
        except ValueError:
            self.entries = []  # derived from the log's batches; a bad file is not fatal
        self._dirty = False

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0:
            return False
        if self.entries and (epoch <= self.entries[-1][0]):
            return False
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        self._write(fsync=False)
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers (Kafka's ``LeaderEpochFileCache.endOffsetFor``).

        The end offset of ``epoch`` is the start of the next larger epoch (the
        log end for the latest), paired with the largest epoch at or below
        ``epoch`` (``epoch`` itself when it is older than every entry). An
        epoch newer than the latest, or an empty cache: (-1, -1).
        """
        entries = self.entries
        if epoch < 0 or not entries or epoch > entries[-1][0]:
            return -1, -1
        if epoch == entries[-1][0]:
            return epoch, log_end_offset
        i = next(i for i, (e, _start) in enumerate(entries) if e > epoch)
        return (entries[i - 1][0] if i else epoch), entries[i][1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        n = len(self.entries)
        self.entries = [(e, o) for e, o in self.entries if o < end_offset]
        if len(self.entries) != n:
            self._write(fsync=False)

    def truncate_from_start(self, start_offset: int) -> None:
        """Entries before the new log start offset collapse into one starting there."""
        keep = [(e, o) for e, o in self.entries if o >= start_offset]
        before = [(e, o) for e, o in self.entries if o < start_offset]
        if before:
            keep.insert(0, (before[-1][0], start_offset)) if not keep or keep[0][1] > start_offset else None
        if keep != self.entries:
            self.entries = keep
            self._write(fsync=False)

    def clear(self) -> None:
        self.entries = []
        self._write(fsync=False)

    def flush(self) -> None:
        if self._dirty:
            self._write(fsync=True)

    def _write(self, *, fsync: bool) -> None:
        write_epoch_checkpoint(self.path, self.entries, fsync=fsync)
        self._dirty = not fsync


def write_partition_metadata(partition_dir: Path, topic_id: uuid.UUID) -> None:
    """``partition.metadata`` naming ``topic_id``, as Kafka's ``PartitionMetadataFile`` writes it."""
    text = f"version: {CHECKPOINT_VERSION}\ntopic_id: {format_topic_id(topic_id)}"
    write_atomically(Path(partition_dir) / PARTITION_METADATA, text.encode("ascii"))


def read_partition_metadata(partition_dir: Path) -> uuid.UUID | None:
    """The topic id ``partition.metadata`` names, None when the file does not exist; ValueError when malformed."""
    path = Path(partition_dir) / PARTITION_METADATA
    try:
        text = path.read_text("ascii")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not text") from None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"{path}: bad line {line!r}")
        fields[key.strip()] = value.strip()
    if fields.get("version") != str(CHECKPOINT_VERSION):
        raise ValueError(f"{path}: version {fields.get('version')!r} is not {CHECKPOINT_VERSION}")
    try:
        return parse_topic_id(fields.get("topic_id", ""))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
