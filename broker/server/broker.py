"""The broker process: wires config, metadata, logs, topics, network and metrics together.

Start-up order (each step blocking work runs in an executor, never on the loop):

1. lock every log dir (``<log.dir>/.lock``, :mod:`broker.log.dirlock`) before
   anything in them is read; a dir held by another process stops the start,
   and so does every dir being broken; a broken one (an I/O error: a failed
   disk or mount) is offline from the start, as in Kafka: nothing in it is
   read or written, DescribeLogDirs reports it, its partitions are
   offline here, and once registered the broker tells the controller
   (``/log_dir_event_notification``). The first dir, when it holds the
   embedded metadata store, must work;
2. open the metadata store (:func:`broker.cluster.store_for`: embedded in
   ``<first log dir>/metadata-store.json``, or ZooKeeper when
   ``zookeeper.connect`` is set), settle the broker id
   (:mod:`broker.server.broker_id`) and refuse an id another broker has
   registered, before anything is written in the log dirs; make or read the
   cluster id, write ``meta.properties`` in every log dir;
3. open the log manager (recovering every partition; it logs one line saying
   what it found and cut) and read the topic, dynamic broker and group configs;
4. bind the listeners (port 0 allowed), remove the clean-shutdown markers
   (nothing could be appended before this point), start accepting, compute the
   advertised endpoints from the ports actually bound, register this broker
   (ephemeral; :class:`broker.cluster.BrokerSession` registers again when a
   ZooKeeper session expires) and start the controller
   (:class:`broker.cluster.controller.Controller`: it stands for election, and
   runs the cluster while elected); wait until the controller's LeaderAndIsr
   and UpdateMetadata have reached this broker (its metadata cache names it),
   so what it answers from then on is the cluster's;
5. follow config changes (topics, brokers, quotas, groups), start the metrics
   HTTP endpoint and the log's background threads.

The single node runs the same machinery: it registers, is elected controller
(it is the only broker) and sends itself LeaderAndIsr and UpdateMetadata.

A start that fails at any step undoes what ran (closes the listeners, stops
the threads, closes the logs, releases the locks) and writes nothing on its
way out: no checkpoints and no clean-shutdown marker. A start that fails
before step 4 removed the markers (a port in use) leaves a cleanly shut down
dir marked clean; one that fails later leaves it to be recovered at the next
start. Only a broker that completed its start is stopped by
:meth:`Broker.stop`, which first asks the controller for a controlled shutdown
(:mod:`broker.server.shutdown`, with ``controlled.shutdown.enable``: its
leaderships move to other replicas while it still serves), then reverses the start:
resign as controller, stop accepting, answer in-flight requests (long polls are woken at once),
flush every log, write the checkpoints and the clean-shutdown markers, close
the metadata session, release the locks. A step that takes more than
``SLOW_SHUTDOWN_STEP_S`` is logged (a warning naming it and how long it took),
so a slow stop says where its time went.

A log dir that fails while the broker runs (:mod:`broker.log.failure`) takes
only its partitions offline (:meth:`ReplicaManager.mark_offline`) and writes
``/log_dir_event_notification/log_dir_event_N`` for the controller. When the
last dir fails there is nothing left to serve: ``fatal`` is set with the
reason, and the process stops the broker and exits 1 (Kafka halts).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from functools import partial
from typing import Any, Callable

from broker.cluster import BrokerRegistration, BrokerSession, ClusterMetadata, store_for
from broker.cluster.controller import Controller
from broker.config import BrokerConfig, Endpoint
from broker.coordinator import GroupCoordinator, ReplicaStore
from broker.share import SHARE_GROUP_APIS, ShareCoordinator, ShareManager, share_metrics_snapshot
from broker.log import LogConfig, LogDirLocks, LogManager, lock_usable_log_dirs
from broker.metrics import BrokerMetrics
from broker.protocol import ApiKey
from broker.replica import FetcherSettings, ReplicaManager
from broker.server.broker_id import resolve_broker_id
from broker.server.client_metrics import ClientMetricsCollector, ClientMetricsManager
from broker.server.dynamic_config import DynamicBrokerConfig
from broker.server.fetch_sessions import FetchSessionCache
from broker.server.group_configs import GroupConfigs
from broker.server.quotas import QuotaManager
from broker.server.health import consumer_lag_snapshot, health_snapshot
from broker.server.metadata_cache import MetadataCache
from broker.server.network import NetworkServer
from broker.server.shutdown import controlled_shutdown
from broker.server.registry import ApiRegistry, load_apis
from broker.server.topics import TopicManager
from broker.acl import AclWatcher, Authorizer
from broker.client._sasl import SaslSettings
from broker.sasl import ScramCredential, sanitize_user, scram_credentials
from broker.tls import TlsContexts
from broker.tokens import TokenAuth, TokenManager
from broker.txn import TransactionCoordinator

log = logging.getLogger("broker")

SLOW_SHUTDOWN_STEP_S = 5.0  # a shutdown step slower than this is logged


def _inter_broker_sasl(config: BrokerConfig) -> SaslSettings | None:
    """The inter-broker listener's SASL client settings (its JAAS ``username``/``password`` for
    ``sasl.mechanism.inter.broker.protocol``), or None when it is not SASL."""
    credentials = config.inter_broker_sasl()
    if credentials is None:
        return None
    if credentials.kerberos is not None:  # GSSAPI: the listener's keytab and principal
        return SaslSettings(credentials.mechanism, kerberos=credentials.kerberos,
                            kerberos_service_name=credentials.service_name)
    return SaslSettings(credentials.mechanism, credentials.username, credentials.password)


class Broker:
    """One broker: see the module docstring. Use ``await start()`` then ``await stop()``."""

    def __init__(self, config: BrokerConfig, registry: ApiRegistry | None = None) -> None:
        self.config = config
        self.broker_id: int = config.broker_id if config.broker_id >= 0 else 0
        self.metrics = BrokerMetrics()
        self.registry = registry if registry is not None else load_apis()
        if not config["group.share.enable"]:  # share groups off: their APIs are neither served nor advertised
            self.registry.unregister(*SHARE_GROUP_APIS)
        if not config["telemetry.exporter.enable"]:  # no client metrics: clients never start telemetry
            self.registry.unregister(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY)
        self.replicas = ReplicaManager()
        self.default_log_config = LogConfig.from_properties(config.log_config_properties())
        self.dynamic_config = DynamicBrokerConfig(self)
        #: Group configs (:mod:`broker.server.group_configs`): loaded at start, followed through config changes
        self.group_configs = GroupConfigs(self)
        #: Client metrics subscriptions and the clients that push (:mod:`broker.server.client_metrics`)
        self.client_metrics = ClientMetricsManager(self)
        self.metrics.registry.register(ClientMetricsCollector(self.client_metrics))
        #: Client quotas (:mod:`broker.server.quotas`): loaded at start, followed through config changes
        self.quotas = QuotaManager(config)
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"],
                                                on_evict=self.metrics.fetch_session_evictions.inc)
        self.metrics.fetch_sessions.set_function(lambda: len(self.fetch_sessions.sessions))
        self.metrics.fetch_session_partitions.set_function(lambda: self.fetch_sessions.partitions)
        self.metadata = ClusterMetadata(store_for(config))
        #: Delegation tokens (:mod:`broker.tokens`): enabled by ``delegation.token.master.key``
        self.tokens = TokenManager.from_config(self.metadata, config)
        self.session: BrokerSession | None = None
        self.log_manager: LogManager | None = None
        self.metadata_cache = MetadataCache()
        self.controller = Controller(self)
        self.topics = TopicManager(self)
        self.coordinator = GroupCoordinator(config, ReplicaStore(
            self.replicas, config, partition_count=self._offsets_partition_count,
            create_topic=self._create_internal_topic, alive_brokers=lambda: len(self.live_brokers())),
            self.metrics)
        self.coordinator.topic_source = self.metadata_cache.partition_counts
        self.coordinator.group_setting = lambda group_id, name: int(self.group_configs.value(group_id, name))
        self.coordinator.other_group_type = lambda group_id: (
            "share" if group_id in self.share_coordinator.groups else None)
        self.txn_coordinator = TransactionCoordinator(self)
        #: Share groups (KIP-932): membership where this broker coordinates, records where it leads
        self.share_coordinator = ShareCoordinator(self)
        self.share_manager = ShareManager(self)
        self.metrics.watch_share_groups(lambda: share_metrics_snapshot(self.share_coordinator, self.share_manager))
        self.network: NetworkServer | None = None
        #: TLS contexts of the SSL listeners and for SSL connections to other brokers (:mod:`broker.tls`)
        self.tls = TlsContexts()
        #: The ACL authorizer (:mod:`broker.acl`), None without ``authorizer.class.name``
        self.authorizer: Authorizer | None = None
        self.acl_watcher: AclWatcher | None = None
        #: What this broker authenticates with to the others when the inter-broker listener is SASL
        self.inter_broker_sasl: SaslSettings | None = _inter_broker_sasl(self.config)
        self.cluster_id: str | None = None
        self.endpoints: list[Endpoint] = []
        self.metrics_port: int | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.dir_locks: LogDirLocks | None = None
        self._started = False
        self._stopped = False
        #: Set (with ``fatal_reason``) when the broker cannot go on: every log dir has failed.
        self.fatal = asyncio.Event()
        self.fatal_reason: str | None = None

    # -- helpers for handlers -----------------------------------------------------------
    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run blocking work (store writes, file removal) in the default executor."""
        return await asyncio.get_running_loop().run_in_executor(None, partial(fn, *args))

    async def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """A user's SCRAM credential for ``mechanism`` from the metadata store (read at each authentication,
        so a change made on any broker is in force at once), or None."""
        config = await self.run_blocking(self.metadata.user_config, sanitize_user(user))
        return scram_credentials(config).get(mechanism)

    async def token_auth(self, token_id: str, mechanism: str) -> "TokenAuth | None":
        """What a SCRAM authentication with delegation token ``token_id`` needs (read from the store at each
        authentication, as SCRAM credentials are), or None."""
        return await self.run_blocking(self.tokens.scram_auth, token_id, mechanism)

    @property
    def broker_epoch(self) -> int:
        """This broker's epoch (KIP-380): the czxid of its latest registration; -1 before it registered."""
        return self.session.broker_epoch if self.session is not None else -1

    def is_broker_epoch_stale(self, broker_epoch: int) -> bool:
        """Kafka's check of a controller request's ``broker_epoch``: -1 (unknown) passes, an older one is stale
        (meant for this broker before it registered again); a newer one passes (the controller may learn of
        a registration before the broker has its epoch)."""
        return broker_epoch != -1 and broker_epoch < self.broker_epoch

    @property
    def controller_id(self) -> int:
        """The controller as the metadata cache knows it; -1 before the first UpdateMetadata."""
        return self.metadata_cache.controller_id

    def live_brokers(self) -> list[int]:
        """Ids of the live brokers, as the metadata cache knows them."""
        return [b.id for b in self.metadata_cache.alive_brokers()]

    def _offsets_partition_count(self) -> int | None:
        info = self.topics.get("__consumer_offsets")
        return None if info is None else len(info.partitions)

    async def _create_internal_topic(self, name: str, partitions: int, factor: int, configs: dict) -> int:
        """The group coordinator's way to create ``__consumer_offsets`` (raises TopicError)."""
        info = await self.topics.create_topic(name, num_partitions=partitions, replication_factor=factor,
                                              configs=configs)
        return len(info.partitions)

    def listener_endpoint(self) -> Endpoint:
        return self.endpoints[0]

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Start (see the module docstring); on failure undo it, write nothing, and raise."""
        self.loop = asyncio.get_running_loop()
        self.replicas.handback.loop = self.loop
        try:
            await self._start()
        except BaseException:
            await self._abandon_start()
            raise
        self._started = True

    async def _start(self) -> None:
        # TLS key and trust stores first: one that cannot be read stops the start before any log dir is touched
        self.tls = await self.run_blocking(TlsContexts.from_config, self.config)
        await self.run_blocking(self._open_storage)
        if self.config["authorizer.class.name"]:  # the ACLs are in memory before any request is taken
            self.authorizer = Authorizer(self.metadata.store, self.config["super.users"],
                                         self.config["allow.everyone.if.no.acl.found"])
            self.acl_watcher = AclWatcher(self.authorizer, self.loop, self.run_blocking)
            await self.acl_watcher.start()
        self.network = NetworkServer(self)
        self.dynamic_config.apply_connection_limits()  # in force before the first accept
        bound = await self.network.start()
        await self.run_blocking(self.log_manager.unmark_clean_shutdown)
        await self.network.serve()
        self.endpoints = self.config.advertised_endpoints({name: port for name, (_h, port) in bound.items()})
        await self.run_blocking(self._register)
        offline = self.log_manager.failure_channel.offline_dirs
        self.metrics.offline_log_dirs.set(len(offline))
        for log_dir in offline:  # broken before the start: the controller hears of it as of a failure
            asyncio.ensure_future(self._propagate_log_dir_event(log_dir))
        self.replicas.start()
        self.dynamic_config.apply()
        self.controller.start()
        await self._wait_for_metadata()
        # after the controller's first requests: the coordinators see their topics' partitions
        await self.coordinator.start()
        await self.txn_coordinator.start()
        self.topics.start()
        self.metrics.watch_logs(lambda: self.log_manager.logs().items())
        self.metrics.watch_appenders(lambda: self.log_manager.appender_stats())
        self.metrics.log_cleaner_threads.set_function(lambda: self.log_manager.cleaner_threads_alive)
        self.metrics.watch_health(partial(health_snapshot, self))
        self.metrics.watch_quotas(lambda: list(self.quotas.snapshot()))
        self.metrics.watch_consumer_lag(partial(consumer_lag_snapshot, self))
        if self.config.metrics_port >= 0:
            host = self.config.listeners[0].host or "0.0.0.0"
            self.metrics_port = self.metrics.start_http(host, self.config.metrics_port)
        self.log_manager.start_background()
        log.info("broker %d started: cluster %s, listeners %s", self.broker_id, self.cluster_id,
                 ", ".join(str(e) for e in self.endpoints))

    def _open_storage(self) -> None:
        self.dir_locks = lock_usable_log_dirs(self.config.log_dirs)
        broken = self.dir_locks.failed
        first = Path(self.config.log_dirs[0])
        if self.config.metadata_store_kind != "zookeeper" and first in broken:
            raise OSError(f"log dir {first} holds the embedded metadata store and is broken: {broken[first]}")
        self.metadata.start()
        self.broker_id = resolve_broker_id(self.config, self.metadata,
                                           [d for d in map(Path, self.config.log_dirs) if d not in broken])
        self.metadata.check_broker_id_free(self.broker_id)
        self.cluster_id = self.metadata.ensure_cluster_id()
        cfg = self.config
        self.log_manager = LogManager(
            cfg.log_dirs,
            self.default_log_config,
            retention_check_interval_ms=cfg.log_retention_check_interval_ms,
            checkpoint_interval_ms=cfg.log_flush_offset_checkpoint_interval_ms,
            cleaner_backoff_ms=cfg.log_cleaner_backoff_ms,
            cleaner_threads=cfg.log_cleaner_threads,
            topic_config=self._topic_log_config,
            flush_timer=self.metrics.log_flush_duration.observe,
            producer_id_expiration_ms=cfg.producer_id_expiration_ms,
            producer_id_expiration_check_interval_ms=cfg.producer_id_expiration_check_interval_ms,
        )
        # results ``[((future, partition), result), ...]`` go to ReplicaManager.settle on the loop
        self.log_manager.append_deliver = self.replicas.handback.deliver
        self.log_manager.on_log_dir_offline = self._on_log_dir_offline
        self.replicas.attach(self.log_manager, self.broker_id, log_config_for=self._log_config_of_topic,
                             isr_writer=self.metadata.write_isr, fetcher_settings=FetcherSettings(
                                 cfg.num_replica_fetchers, cfg.replica_fetch_wait_max_ms, cfg.replica_fetch_min_bytes,
                                 cfg.replica_fetch_max_bytes, cfg.replica_fetch_response_max_bytes,
                                 cfg.replica_fetch_backoff_ms, cfg.replica_socket_timeout_ms,
                                 lambda: self.tls.inter_broker, self.inter_broker_sasl),
                             replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
                             partition_known=lambda t, p: self.metadata_cache.partition(t, p) is not None)
        for log_dir, exc in broken.items():
            self.log_manager.mark_offline_at_start(log_dir, str(exc))
        self.log_manager.ensure_meta_properties(self.broker_id, self.cluster_id)
        self.log_manager.startup(keep_clean_markers=True)  # removed just before the listeners accept
        self.topics.load()
        self.dynamic_config.load()
        self.group_configs.load()
        self.client_metrics.load()
        self.quotas.load(QuotaManager.read_all(self.metadata))  # before any listener accepts
        self.quotas.load_ips(QuotaManager.read_all_ips(self.metadata))

    def _log_config_of_topic(self, topic: str) -> LogConfig:
        return self._topic_log_config(topic) or self.default_log_config

    def _on_log_dir_offline(self, log_dir, partitions: list, reason: str) -> None:
        """A log dir failed (told on the thread that met the error): the rest happens on the loop."""
        try:
            self.loop.call_soon_threadsafe(self._log_dir_offline, log_dir, partitions, reason)
        except RuntimeError:  # the loop is closed: the process is ending anyway
            pass

    def _log_dir_offline(self, log_dir, partitions: list, reason: str) -> None:
        self.replicas.mark_offline(partitions)
        if self.dir_locks is not None:
            self.dir_locks.release_dir(log_dir)
        self.metrics.offline_log_dirs.set(len(self.log_manager.failure_channel.offline_dirs))
        if not self.log_manager.live_log_dirs:
            self.fatal_reason = (f"every log dir has failed ({', '.join(map(str, self.log_manager.log_dirs))}; "
                                 f"the last, {log_dir}: {reason})")
            log.critical("shutting down: %s", self.fatal_reason)
            self.fatal.set()
            return
        asyncio.ensure_future(self._propagate_log_dir_event(log_dir))

    async def _propagate_log_dir_event(self, log_dir) -> None:
        try:
            await self.run_blocking(self.metadata.propagate_log_dir_event, self.broker_id)
        except Exception as exc:  # noqa: BLE001 - the store is down: the controller learns at our next registration
            log.error("could not tell the controller that log dir %s failed: %s", log_dir, exc)

    def _topic_log_config(self, topic: str) -> LogConfig | None:
        overrides = self.metadata.topic_config(topic)
        if not overrides:
            return None
        try:
            return self.default_log_config.with_overrides(overrides)
        except ValueError as exc:
            log.warning("topic %s: ignoring bad stored config (%s)", topic, exc)
            return None

    def _register(self) -> None:
        protocols = tuple((e.listener_name, self.config.security_protocol(e.listener_name)) for e in self.endpoints)
        registration = BrokerRegistration(self.broker_id, tuple(self.endpoints), self.config.broker_rack,
                                          protocols=protocols)
        self.session = BrokerSession(self.metadata, registration, self.cluster_id,
                                     on_registered=lambda: self.controller.enqueue("registered"))
        self.session.register()

    async def _wait_for_metadata(self) -> None:
        """Wait until the controller told this broker about itself (a cluster's controller may be slow)."""
        cache = self.metadata_cache
        timeout_ms = max(self.config.zookeeper_session_timeout_ms, 10000)
        if not await cache.wait_until(lambda: cache.broker(self.broker_id) is not None, timeout_ms / 1000):
            log.warning("broker %d: no UpdateMetadata from a controller within %d ms; serving on",
                        self.broker_id, timeout_ms)

    def _close_metadata(self) -> None:
        if self.session is not None:
            self.session.close()
        self.metadata.close()

    async def _abandon_start(self) -> None:
        self._stopped = True
        await self.controller.stop()
        self.metadata_cache.stop()
        self.replicas.close()
        await self.replicas.shutdown()
        await self.txn_coordinator.shutdown()
        await self.coordinator.shutdown()
        if self.network is not None:
            await self.network.stop(0)
        self.metrics.stop_http()
        if self.log_manager is not None:
            await self.run_blocking(self.log_manager.abandon)
        await self.run_blocking(self._close_metadata)
        self._release_dirs()

    async def _shutdown_step(self, name: str, step) -> None:
        started = time.monotonic()
        await step
        took = time.monotonic() - started
        if took > SLOW_SHUTDOWN_STEP_S:
            log.warning("broker %d: shutdown step %s took %.1f s", self.broker_id, name, took)

    def _release_dirs(self) -> None:
        if self.dir_locks is not None:
            self.dir_locks.release()

    async def stop(self) -> None:
        """Graceful shutdown of a started broker: see the module docstring. Safe to call twice."""
        if self._stopped or not self._started:
            return
        self._stopped = True
        log.info("broker %d shutting down", self.broker_id)
        if self.acl_watcher is not None:
            self.acl_watcher.stopped = True
        if self.config.controlled_shutdown_enable:
            await self._shutdown_step("controlled shutdown", controlled_shutdown(self))
        await self._shutdown_step("controller", self.controller.stop())
        self.metadata_cache.stop()  # no update comes any more: requests waiting for one are answered now
        self.replicas.close()
        await self._shutdown_step("transaction coordinator", self.txn_coordinator.shutdown())
        await self._shutdown_step("group coordinator", self.coordinator.shutdown())
        if self.network is not None:
            await self._shutdown_step("listeners", self.network.stop(self.config.shutdown_timeout_ms / 1000))
        await self._shutdown_step("replica fetchers", self.replicas.shutdown())
        if self.log_manager is not None:
            await self._shutdown_step("logs", self.run_blocking(self.log_manager.shutdown))
        await self._shutdown_step("metadata session", self.run_blocking(self._close_metadata))
        self.metrics.stop_http()
        self._release_dirs()
        log.info("broker %d stopped", self.broker_id)

