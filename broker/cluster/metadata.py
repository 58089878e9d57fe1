"""Typed access to cluster metadata on top of any :class:`MetadataStore`.

``ClusterMetadata`` turns the znode tree (layouts in :mod:`broker.cluster.znodes`)
into Python values: the cluster id, broker registrations, the controller, topic
assignments, topic configs and partition states. Multi-node writes are atomic
(``store.multi``), so a topic is either fully created or absent.

A topic config change writes ``/config/topics/<t>`` and then a sequential
``/config/changes/config_change_N`` notification, as Kafka's admin client
does; notifications older than 15 minutes (Kafka's expiry) are removed at the
next change, so they do not pile up.

Topic deletion is two-phase, as in Kafka: :meth:`mark_topic_deletion` writes
``/admin/delete_topics/<t>``, the caller removes the logs, then
:meth:`complete_topic_deletion` removes the topic's nodes and the mark. A broker
that restarts between the two finds the mark in :meth:`pending_deletions` and
finishes the job, so a deleted topic never comes back.

Thread-safe as the store is; every method blocks on store I/O (the embedded
store fsyncs), so the event loop calls them through an executor.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

from broker.cluster.store import (
    BadVersionError,
    Check,
    Create,
    Delete,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    Op,
    SetData,
    StoreError,
)
from broker.cluster.znodes import (
    PERSISTENT_PATHS,
    BrokerConfigZNode,
    BrokerIdZNode,
    BrokerRegistration,
    BrokerSequenceIdZNode,
    ClientMetricsZNode,
    ClusterIdZNode,
    ConfigChangeNotificationZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicZNode,
    GroupConfigZNode,
    IsrChangeNotificationZNode,
    LogDirEventNotificationZNode,
    PartitionState,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    TopicConfigZNode,
    UserConfigZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicZNode,
    new_cluster_id,
)
from broker.topic_ids import format_topic_id, new_topic_id

#: Where share groups keep what they consumed (:mod:`broker.share.manager`)
SHARE_GROUP_STATE_ROOT = "/share_group_state"

#: How long a config change notification is kept (Kafka's ``changeExpirationMs``).
NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000


class BrokerIdInUseError(StoreError):
    """``/brokers/ids/<id>`` is held by another session: a live broker with our id, or a dead one's
    session that has not expired yet."""


class ControllerMovedError(StoreError):
    """A controller write found ``/controller_epoch`` at another version: a newer controller was elected."""


class TopicExistsError(Exception):
    """The topic already has an assignment (Kafka error TOPIC_ALREADY_EXISTS, 36)."""

    error_code = 36


class ClusterMetadata:
    """Cluster metadata as values; see the module docstring."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def start(self) -> None:
        self.store.start()
        for path in PERSISTENT_PATHS:
            self.store.ensure_path(path)

    def close(self) -> None:
        self.store.close()

    # -- cluster id -------------------------------------------------------------------
    def ensure_cluster_id(self) -> str:
        """The cluster id, made (22 URL-safe base64 characters) at the first start and kept."""
        found = self.store.get_or_none(ClusterIdZNode.path())
        if found is not None:
            return ClusterIdZNode.decode(found[0])
        try:
            self.store.create(ClusterIdZNode.path(), ClusterIdZNode.encode(new_cluster_id()), make_parents=True)
        except NodeExistsError:
            pass
        return ClusterIdZNode.decode(self.store.get(ClusterIdZNode.path())[0])

    # -- brokers and controller ------------------------------------------------------------
    def register_broker(self, registration: BrokerRegistration) -> int:
        """Announce this broker (ephemeral: gone when the store session ends); BrokerIdInUseError if taken.

        Returns the broker epoch (KIP-380): the czxid of the new znode, -1 if it is gone already.
        """
        path = BrokerIdZNode.path(registration.broker_id)
        try:
            self.store.create(path, BrokerIdZNode.encode(registration), ephemeral=True)
        except NodeExistsError:
            raise self.broker_id_in_use(registration.broker_id) from None
        stat = self.store.exists(path)
        return -1 if stat is None else stat.czxid

    def check_broker_id_free(self, broker_id: int) -> None:
        """Raise BrokerIdInUseError when ``/brokers/ids/<broker_id>`` exists (checked before touching data)."""
        if self.store.exists(BrokerIdZNode.path(broker_id)) is not None:
            raise self.broker_id_in_use(broker_id)

    def broker_id_in_use(self, broker_id: int) -> BrokerIdInUseError:
        where = getattr(self.store, "connect", "the metadata store")
        return BrokerIdInUseError(
            f"broker.id {broker_id} is already registered in {where} (/brokers/ids/{broker_id}): another "
            f"broker runs with this id, or a killed one's ZooKeeper session has not expired yet")

    def generate_broker_id(self, reserved_broker_max_id: int) -> int:
        """Kafka's broker id generation: bump ``/brokers/seqid`` and add its new version to the reserved max."""
        path = BrokerSequenceIdZNode.path()
        try:
            stat = self.store.set(path, b"")
        except NoNodeError:
            self.store.ensure_path(path)
            stat = self.store.set(path, b"")
        return reserved_broker_max_id + stat.version

    def brokers(self) -> dict[int, BrokerRegistration]:
        result = {}
        for child in self.store.get_children("/brokers/ids"):
            found = self.store.get_or_none(BrokerIdZNode.path(int(child)))
            if found is not None:
                result[int(child)] = replace(BrokerIdZNode.decode(int(child), found[0]), broker_epoch=found[1].czxid)
        return result

    def elect_controller(self, broker_id: int) -> int:
        """Try to become controller; returns the controller's id (ours or the incumbent's)."""
        return self.elect(broker_id)[0]

    def elect(self, broker_id: int) -> tuple[int, int, int]:
        """Try to become controller: ``(controller id, controller epoch, epoch znode version)``.

        The epoch and its znode version are those our election wrote when we
        won (every write of ours is then conditional on that version), else
        -1 and -1.

        As Kafka: ``/controller_epoch`` is made as ``0`` when missing, and the
        ephemeral ``/controller`` is created in one transaction with the epoch
        bump, conditional on the epoch's version, so two brokers racing cannot
        both win or bump it twice.
        """
        epoch_path = ControllerEpochZNode.path()
        while True:
            found = self.store.get_or_none(epoch_path)
            if found is None:
                try:
                    self.store.create(epoch_path, ControllerEpochZNode.encode(0))
                except NodeExistsError:
                    pass
                continue
            epoch = ControllerEpochZNode.decode(found[0]) + 1
            try:
                self.store.multi([
                    Create(ControllerZNode.path(), ControllerZNode.encode(broker_id), ephemeral=True),
                    SetData(epoch_path, ControllerEpochZNode.encode(epoch), found[1].version),
                ])
                return broker_id, epoch, found[1].version + 1
            except NodeExistsError:
                current = self.controller_id()
                if current != -1:
                    return current, -1, -1
            except BadVersionError:
                pass  # another broker was elected meanwhile: look again

    def controller_id(self) -> int:
        found = self.store.get_or_none(ControllerZNode.path())
        return -1 if found is None else ControllerZNode.decode(found[0])

    def controller_epoch(self) -> int:
        found = self.store.get_or_none(ControllerEpochZNode.path())
        return 0 if found is None else ControllerEpochZNode.decode(found[0])

    # -- producer ids ----------------------------------------------------------------------
    def allocate_producer_id_block(self, broker_id: int, size: int = 1000) -> tuple[int, int]:
        """Claim the next ``size`` producer ids (inclusive range), compare-and-set so no two brokers share one."""
        path = ProducerIdBlockZNode.path()
        while True:
            found = self.store.get_or_none(path)
            if found is None:
                start = 0
                try:
                    self.store.create(path, ProducerIdBlockZNode.encode(broker_id, start, start + size - 1))
                    return start, start + size - 1
                except NodeExistsError:
                    continue
            start = ProducerIdBlockZNode.decode(found[0])[2] + 1 if found[0] else 0
            try:
                self.store.set(path, ProducerIdBlockZNode.encode(broker_id, start, start + size - 1),
                               found[1].version)
                return start, start + size - 1
            except BadVersionError:
                continue

    # -- topics -------------------------------------------------------------------------
    def topics(self) -> list[str]:
        return self.store.get_children("/brokers/topics")

    def topic_assignment(self, topic: str) -> dict[int, list[int]] | None:
        found = self.store.get_or_none(TopicZNode.path(topic))
        return None if found is None else TopicZNode.decode(found[0])

    def topic_id(self, topic: str) -> uuid.UUID | None:
        found = self.store.get_or_none(TopicZNode.path(topic))
        return None if found is None else TopicZNode.decode_topic_id(found[0])

    def topic_config(self, topic: str) -> dict[str, str]:
        found = self.store.get_or_none(TopicConfigZNode.path(topic))
        return {} if found is None else TopicConfigZNode.decode(found[0])

    def set_topic_config(self, topic: str, config: dict[str, str]) -> None:
        """Write a topic's config overrides and notify every broker (see the module docstring)."""
        path = TopicConfigZNode.path(topic)
        data = TopicConfigZNode.encode(config)
        if self.store.exists(path) is None:
            self.store.create(path, data, make_parents=True)
        else:
            self.store.set(path, data)
        self.store.create(ConfigChangeNotificationZNode.create_path(), ConfigChangeNotificationZNode.encode_topic(topic),
                          sequence=True, make_parents=True)
        self._purge_notifications()

    def broker_config(self, entity: str) -> dict[str, str]:
        """Dynamic configs of broker ``entity`` (its id, or ``<default>`` for every broker)."""
        found = self.store.get_or_none(BrokerConfigZNode.path(entity))
        return {} if found is None else BrokerConfigZNode.decode(found[0])

    def set_broker_config(self, entity: str, config: dict[str, str]) -> None:
        """Write dynamic broker configs and notify every broker (``brokers/<entity>``), as for a topic."""
        path = BrokerConfigZNode.path(entity)
        data = BrokerConfigZNode.encode(config)
        if self.store.exists(path) is None:
            self.store.create(path, data, make_parents=True)
        else:
            self.store.set(path, data)
        self.store.create(ConfigChangeNotificationZNode.create_path(), ConfigChangeNotificationZNode.encode_broker(entity),
                          sequence=True, make_parents=True)
        self._purge_notifications()

    def users(self) -> list[str]:
        """The sanitized names of every user with configs (SCRAM credentials)."""
        return self.store.get_children(UserConfigZNode.root()) if self.store.exists(UserConfigZNode.root()) else []

    def user_config(self, sanitized: str) -> dict[str, str]:
        """Configs of one user (``SCRAM-SHA-256`` -> its credential text); {} for none (or a name that cannot
        be a node: empty, ``.`` or ``..``)."""
        if sanitized in ("", ".", ".."):
            return {}
        found = self.store.get_or_none(UserConfigZNode.path(sanitized))
        return {} if found is None else UserConfigZNode.decode(found[0])

    def set_user_config(self, sanitized: str, config: dict[str, str]) -> None:
        """Write a user's configs and notify every broker (``users/<user>``). A user left without any keeps
        its node, with an empty config, as Kafka writes it (the node may hold quota children)."""
        path = UserConfigZNode.path(sanitized)
        if self.store.exists(path) is None:
            self.store.create(path, UserConfigZNode.encode(config), make_parents=True)
        else:
            self.store.set(path, UserConfigZNode.encode(config))
        self.store.create(ConfigChangeNotificationZNode.create_path(), ConfigChangeNotificationZNode.encode_user(sanitized),
                          sequence=True, make_parents=True)
        self._purge_notifications()

    def groups_with_configs(self) -> list[str]:
        """The sanitized ids of every group with config overrides (``/config/groups/*``)."""
        return self._entities(GroupConfigZNode.root())

    def group_config(self, sanitized: str) -> dict[str, str]:
        """Config overrides of one group; {} for none (or a name that cannot be a node)."""
        return self._entity_config(GroupConfigZNode, sanitized)

    def set_group_config(self, sanitized: str, config: dict[str, str]) -> None:
        """Write a group's config overrides and notify every broker (``groups/<group>``). A group left
        without any loses its node, so groups configured once do not pile up under ``/config/groups``."""
        self._set_entity_config(GroupConfigZNode, "groups", sanitized, config)

    def client_metrics_subscriptions(self) -> list[str]:
        """The sanitized names of every client metrics subscription (``/config/client-metrics/*``)."""
        return self._entities(ClientMetricsZNode.root())

    def client_metrics_config(self, sanitized: str) -> dict[str, str]:
        """The configs of one client metrics subscription; {} when there is none such."""
        return self._entity_config(ClientMetricsZNode, sanitized)

    def set_client_metrics_config(self, sanitized: str, config: dict[str, str]) -> None:
        """Write a client metrics subscription and notify every broker (``client-metrics/<name>``); without
        any config the subscription (its node) goes."""
        self._set_entity_config(ClientMetricsZNode, "client-metrics", sanitized, config)

    def _entities(self, root: str) -> list[str]:
        return self.store.get_children(root) if self.store.exists(root) is not None else []

    def _entity_config(self, znode, sanitized: str) -> dict[str, str]:
        if sanitized in ("", ".", ".."):
            return {}
        found = self.store.get_or_none(znode.path(sanitized))
        return {} if found is None else znode.decode(found[0])

    def _set_entity_config(self, znode, kind: str, sanitized: str, config: dict[str, str]) -> None:
        """Write (or, for an empty config, delete) an entity's node under /config, then the change notification."""
        path = znode.path(sanitized)
        if not config:
            try:
                self.store.delete(path)
            except NoNodeError:
                pass
        elif self.store.exists(path) is None:
            self.store.create(path, znode.encode(config), make_parents=True)
        else:
            self.store.set(path, znode.encode(config))
        self.store.create(ConfigChangeNotificationZNode.create_path(),
                          ConfigChangeNotificationZNode.encode_entity(f"{kind}/{sanitized}"), sequence=True,
                          make_parents=True)
        self._purge_notifications()

    def quota_entity_configs(self) -> list[tuple[str, dict[str, str]]]:
        """``(entity path, config)`` of every user, user and client id, client id and IP address node
        (``users/alice``, ``users/alice/clients/app``, ``clients/app``, ``ips/10.0.0.7``; see
        :mod:`broker.server.quotas`)."""
        out = []
        for kind in ("users", "clients", "ips"):
            root = f"/config/{kind}"
            if self.store.exists(root) is None:
                continue
            for name in self.store.get_children(root):
                path = f"{kind}/{name}"
                out.append((path, self.quota_entity_config(path)))
                if kind == "users" and self.store.exists(f"{root}/{name}/clients") is not None:
                    for client in self.store.get_children(f"{root}/{name}/clients"):
                        out.append((f"{path}/clients/{client}", self.quota_entity_config(f"{path}/clients/{client}")))
        return out

    def quota_entity_config(self, path: str) -> dict[str, str]:
        """The config of the entity at ``/config/<path>`` ({} when it has no node or an empty one)."""
        found = self.store.get_or_none(f"/config/{path}")
        return {} if found is None or not found[0] else UserConfigZNode.decode(found[0])

    def set_quota_entity_config(self, path: str, config: dict[str, str]) -> None:
        """Write the config of the entity at ``/config/<path>`` and notify every broker, as for a user."""
        node = f"/config/{path}"
        if self.store.exists(node) is None:
            self.store.create(node, UserConfigZNode.encode(config), make_parents=True)
        else:
            self.store.set(node, UserConfigZNode.encode(config))
        self.store.create(ConfigChangeNotificationZNode.create_path(),
                          ConfigChangeNotificationZNode.encode_entity(path), sequence=True, make_parents=True)
        self._purge_notifications()

    def config_change_notifications(self) -> list[str]:
        """Names of the pending config change notifications, oldest first."""
        return self.store.get_children(ConfigChangeNotificationZNode.path())

    def _purge_notifications(self) -> None:
        oldest_kept = time.time() * 1000 - NOTIFICATION_EXPIRY_MS
        for name in self.config_change_notifications():
            path = f"{ConfigChangeNotificationZNode.path()}/{name}"
            stat = self.store.exists(path)
            if stat is not None and stat.ctime_ms < oldest_kept:
                try:
                    self.store.delete(path)
                except NoNodeError:
                    pass

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        found = self.store.get_or_none(TopicPartitionStateZNode.path(topic, partition))
        return None if found is None else TopicPartitionStateZNode.decode(found[0], found[1].version)

    def set_partition_state(self, topic: str, partition: int, state: PartitionState, expected_version: int = -1) -> int:
        """Compare-and-set a partition state; returns the new znode version."""
        stat = self.store.set(
            TopicPartitionStateZNode.path(topic, partition), TopicPartitionStateZNode.encode(state), expected_version
        )
        return stat.version

    def create_topic(
        self,
        topic: str,
        assignment: dict[int, list[int]],
        config: dict[str, str],
        states: dict[int, PartitionState] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> uuid.UUID:
        """Write the config and the assignment at once (Kafka's ``AdminZkClient``); TopicExistsError if present.

        The topic gets a new id (KIP-516) unless ``topic_id`` names one; returns it.
        Partition states are the controller's to write; ``states`` writes them
        too, for tools and tests that stand in for a controller.
        """
        topic_id = topic_id or new_topic_id()
        if self.store.exists(DeleteTopicZNode.path(topic)) is not None:
            raise TopicExistsError(f"topic {topic!r} is marked for deletion")
        ops: list[Op] = []
        config_path = TopicConfigZNode.path(topic)
        if self.store.exists(config_path) is not None:
            ops.append(Delete(config_path))
        ops.append(Create(config_path, TopicConfigZNode.encode(config)))
        ops.append(Create(TopicZNode.path(topic), TopicZNode.encode(assignment, topic_id=topic_id)))
        if states:
            ops.append(Create(TopicPartitionsZNode.path(topic)))
            ops += self._partition_ops(topic, states)
        try:
            self.store.multi(ops)
        except NodeExistsError:
            raise TopicExistsError(f"topic {topic!r} already exists") from None
        return topic_id

    def add_partitions(
        self, topic: str, assignment: dict[int, list[int]], new_states: dict[int, PartitionState] | None = None
    ) -> None:
        """Replace the assignment (old partitions unchanged); the controller then makes the new partitions."""
        found = self.store.get(TopicZNode.path(topic))
        adding, removing = TopicZNode.decode_reassignment(found[0])  # a reassignment in progress stays
        topic_id = TopicZNode.decode_topic_id(found[0])  # and so does the id
        ops: list[Op] = [SetData(TopicZNode.path(topic), TopicZNode.encode(assignment, adding, removing, topic_id),
                                 found[1].version)]
        ops += self._partition_ops(topic, new_states or {})
        self.store.multi(ops)

    # -- the controller's writes: each conditional on the controller epoch znode's version --------
    def controller_multi(self, ops: list[Op], epoch_zk_version: int) -> None:
        """``multi([Check /controller_epoch, *ops])``; ControllerMovedError when the epoch moved on.

        Other failures (BadVersionError of a partition state, NoNodeError...)
        are raised as they are.
        """
        try:
            self.store.multi([Check(ControllerEpochZNode.path(), epoch_zk_version), *ops])
        except BadVersionError:
            stat = self.store.exists(ControllerEpochZNode.path())
            if stat is None or stat.version != epoch_zk_version:
                raise ControllerMovedError(
                    f"/controller_epoch is at version {None if stat is None else stat.version}, "
                    f"not {epoch_zk_version}: another broker is controller") from None
            raise

    def create_partition_states(self, topic: str, states: dict[int, PartitionState],
                                epoch_zk_version: int) -> None:
        """Make the state znodes of new partitions (and ``partitions`` itself when missing)."""
        ops: list[Op] = []
        if self.store.exists(TopicPartitionsZNode.path(topic)) is None:
            ops.append(Create(TopicPartitionsZNode.path(topic)))
        for partition, state in sorted(states.items()):
            if self.store.exists(f"{TopicPartitionsZNode.path(topic)}/{partition}") is None:
                ops.append(Create(f"{TopicPartitionsZNode.path(topic)}/{partition}"))
            ops.append(Create(TopicPartitionStateZNode.path(topic, partition), TopicPartitionStateZNode.encode(state)))
        self.controller_multi(ops, epoch_zk_version)

    def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                               epoch_zk_version: int) -> int:
        """Compare-and-set a partition state at ``state.version``; returns the new znode version."""
        self.controller_multi([SetData(TopicPartitionStateZNode.path(topic, partition),
                                       TopicPartitionStateZNode.encode(state), state.version)], epoch_zk_version)
        return state.version + 1

    def write_reassignment(self, topic: str, assignment: dict[int, list[int]], adding: dict[int, list[int]],
                           removing: dict[int, list[int]], epoch_zk_version: int,
                           topic_id: uuid.UUID | None = None) -> None:
        """The controller's rewrite of ``/brokers/topics/<t>`` during reassignments (KIP-455 layout)."""
        self.controller_multi([SetData(TopicZNode.path(topic),
                                       TopicZNode.encode(assignment, adding, removing, topic_id))], epoch_zk_version)

    def set_topic_id(self, topic: str, data: bytes, zk_version: int, epoch_zk_version: int) -> uuid.UUID:
        """The controller gives a topic without an id (a node Kafka 2.7 or an older tool wrote) a new one,
        as Kafka 2.8's controller does: the node is rewritten at the version it was read at, all else kept.
        Returns the id; BadVersionError when the node changed since it was read."""
        topic_id = new_topic_id()
        adding, removing = TopicZNode.decode_reassignment(data)
        self.controller_multi([SetData(TopicZNode.path(topic), TopicZNode.encode(TopicZNode.decode(data), adding,
                                                                                removing, topic_id), zk_version)],
                              epoch_zk_version)
        return topic_id

    def reassign_partitions_request(self, watch=None) -> dict[tuple[str, int], list[int]] | None:
        """The old tools' ``/admin/reassign_partitions`` (None when absent), watched for its creation."""
        path = ReassignPartitionsZNode.path()
        if self.store.exists(path, watch) is None:
            return None
        found = self.store.get_or_none(path)
        return None if found is None else ReassignPartitionsZNode.decode(found[0])

    def remove_from_reassign_partitions_request(self, done: set[tuple[str, int]]) -> None:
        """Take completed moves out of ``/admin/reassign_partitions``; the node goes when none is left."""
        path = ReassignPartitionsZNode.path()
        found = self.store.get_or_none(path)
        if found is None:
            return
        left = {tp: r for tp, r in ReassignPartitionsZNode.decode(found[0]).items() if tp not in done}
        try:
            if left:
                self.store.set(path, ReassignPartitionsZNode.encode(left), found[1].version)
            else:
                self.store.delete(path)
        except (BadVersionError, NoNodeError):
            pass  # changed meanwhile: the next change event reads it again

    def write_isr(self, topic: str, partition: int, state, zk_version: int) -> int | None:
        """A leader's ISR change: the state written if still at ``zk_version``, then a notification.

        ``state`` is a :class:`PartitionState` or any object with the
        attributes ``leader``, ``leader_epoch``, ``isr`` and ``controller_epoch``
        (the replica layer does not import this package). Returns the new znode version, or None
        when the state moved on meanwhile (re-read it; never write blindly).
        The ``/isr_change_notification/isr_change_N`` node makes the
        controller send the change to every broker, as Kafka's leaders do.
        """
        if not isinstance(state, PartitionState):
            state = PartitionState(int(state.leader), int(state.leader_epoch), tuple(int(b) for b in state.isr),
                                   int(state.controller_epoch))
        try:
            stat = self.store.set(TopicPartitionStateZNode.path(topic, partition),
                                  TopicPartitionStateZNode.encode(state), zk_version)
        except (BadVersionError, NoNodeError):
            return None
        self.store.create(IsrChangeNotificationZNode.create_path(),
                          IsrChangeNotificationZNode.encode([(topic, partition)]), sequence=True, make_parents=True)
        return stat.version

    def propagate_log_dir_event(self, broker_id: int) -> None:
        """A log dir of ``broker_id`` failed: ``/log_dir_event_notification/log_dir_event_N`` for the controller.

        As Kafka's brokers do; the controller then asks the broker which of its
        replicas are offline and moves their leadership.
        """
        self.store.create(LogDirEventNotificationZNode.create_path(),
                          LogDirEventNotificationZNode.encode(broker_id), sequence=True, make_parents=True)

    def take_isr_change_notifications(self) -> set[tuple[str, int]]:
        """The partitions the pending ISR change notifications name; the notifications are removed."""
        changed: set[tuple[str, int]] = set()
        root = IsrChangeNotificationZNode.path()
        for name in self.store.get_children(root):
            found = self.store.get_or_none(f"{root}/{name}")
            if found is not None:
                changed.update(IsrChangeNotificationZNode.decode(found[0]))
                try:
                    self.store.delete(f"{root}/{name}")
                except NoNodeError:
                    pass
        return changed

    @staticmethod
    def _partition_ops(topic: str, states: dict[int, PartitionState]) -> list[Op]:
        ops: list[Op] = []
        for partition, state in sorted(states.items()):
            ops.append(Create(f"{TopicPartitionsZNode.path(topic)}/{partition}"))
            ops.append(Create(TopicPartitionStateZNode.path(topic, partition), TopicPartitionStateZNode.encode(state)))
        return ops

    # -- deletion -------------------------------------------------------------------------
    def mark_topic_deletion(self, topic: str) -> None:
        try:
            self.store.create(DeleteTopicZNode.path(topic), make_parents=True)
        except NodeExistsError:
            pass

    def pending_deletions(self) -> list[str]:
        return self.store.get_children("/admin/delete_topics")

    def complete_topic_deletion(self, topic: str, topic_id: uuid.UUID | None = None) -> None:
        """Remove the topic's nodes and its deletion mark; with its id, also what share groups kept of it
        (``/share_group_state/<group>/<topic id>-<partition>``, :mod:`broker.share.manager`)."""
        for path in (TopicZNode.path(topic), TopicConfigZNode.path(topic), DeleteTopicZNode.path(topic)):
            try:
                self.store.delete(path, recursive=True)
            except NoNodeError:
                pass
        if topic_id is None:
            return
        prefix = format_topic_id(topic_id) + "-"
        try:
            groups = self.store.get_children(SHARE_GROUP_STATE_ROOT)
        except NoNodeError:
            return
        for group in groups:
            try:
                children = self.store.get_children(f"{SHARE_GROUP_STATE_ROOT}/{group}")
            except NoNodeError:
                continue
            for child in children:
                if child.startswith(prefix):
                    try:
                        self.store.delete(f"{SHARE_GROUP_STATE_ROOT}/{group}/{child}")
                    except NoNodeError:
                        pass
