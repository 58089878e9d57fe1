"""The broker property names of Apache Kafka 2.7 (its ``KafkaConfig``), as data.

An operator's existing ``server.properties`` names many properties this broker
does not implement (``num.network.threads``, ``zookeeper.set.acl``, the
``ssl.*`` family, ...). :mod:`broker.config` accepts those with one warning
line each, and refuses a name that is neither ours nor Kafka's (a typo), which
Kafka itself would only warn about. Per-listener overrides
(``listener.name.<listener>.<property>``) count as Kafka's too.
"""

from __future__ import annotations

KAFKA_27_BROKER_PROPERTIES: frozenset[str] = frozenset("""
advertised.host.name advertised.listeners advertised.port alter.config.policy.class.name
alter.log.dirs.replication.quota.window.num alter.log.dirs.replication.quota.window.size.seconds
authorizer.class.name auto.create.topics.enable auto.leader.rebalance.enable background.threads
broker.id broker.id.generation.enable broker.rack client.quota.callback.class compression.type
connection.failed.authentication.delay.ms connections.max.idle.ms connections.max.reauth.ms
control.plane.listener.name controlled.shutdown.enable controlled.shutdown.max.retries
controlled.shutdown.retry.backoff.ms controller.quota.window.num
controller.quota.window.size.seconds controller.socket.timeout.ms create.topic.policy.class.name
default.replication.factor delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
delegation.token.master.key delegation.token.max.lifetime.ms
delete.records.purgatory.purge.interval.requests delete.topic.enable fetch.max.bytes
fetch.purgatory.purge.interval.requests group.initial.rebalance.delay.ms
group.max.session.timeout.ms group.max.size group.min.session.timeout.ms host.name
inter.broker.listener.name inter.broker.protocol.version kafka.metrics.polling.interval.secs
kafka.metrics.reporters leader.imbalance.check.interval.seconds
leader.imbalance.per.broker.percentage listener.security.protocol.map listeners
log.cleaner.backoff.ms log.cleaner.dedupe.buffer.size log.cleaner.delete.retention.ms
log.cleaner.enable log.cleaner.io.buffer.load.factor log.cleaner.io.buffer.size
log.cleaner.io.max.bytes.per.second log.cleaner.max.compaction.lag.ms
log.cleaner.min.cleanable.ratio log.cleaner.min.compaction.lag.ms log.cleaner.threads
log.cleanup.policy log.dir log.dirs log.flush.interval.messages log.flush.interval.ms
log.flush.offset.checkpoint.interval.ms log.flush.scheduler.interval.ms
log.flush.start.offset.checkpoint.interval.ms log.index.interval.bytes log.index.size.max.bytes
log.message.downconversion.enable log.message.format.version log.message.timestamp.difference.max.ms
log.message.timestamp.type log.preallocate log.retention.bytes log.retention.check.interval.ms
log.retention.hours log.retention.minutes log.retention.ms log.roll.hours log.roll.jitter.hours
log.roll.jitter.ms log.roll.ms log.segment.bytes log.segment.delete.delay.ms
max.connection.creation.rate max.connections max.connections.per.ip max.connections.per.ip.overrides
max.incremental.fetch.session.cache.slots message.max.bytes metric.reporters metrics.num.samples
metrics.recording.level metrics.sample.window.ms min.insync.replicas num.io.threads
num.network.threads num.partitions num.recovery.threads.per.data.dir
num.replica.alter.log.dirs.threads num.replica.fetchers offset.metadata.max.bytes
offsets.commit.required.acks offsets.commit.timeout.ms offsets.load.buffer.size
offsets.retention.check.interval.ms offsets.retention.minutes offsets.topic.compression.codec
offsets.topic.num.partitions offsets.topic.replication.factor offsets.topic.segment.bytes
password.encoder.cipher.algorithm password.encoder.iterations password.encoder.key.length
password.encoder.keyfactory.algorithm password.encoder.old.secret password.encoder.secret port
principal.builder.class producer.purgatory.purge.interval.requests queued.max.request.bytes
queued.max.requests quota.consumer.default quota.producer.default quota.window.num
quota.window.size.seconds replica.fetch.backoff.ms replica.fetch.max.bytes replica.fetch.min.bytes
replica.fetch.response.max.bytes replica.fetch.wait.max.ms
replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms replica.selector.class
replica.socket.receive.buffer.bytes replica.socket.timeout.ms replication.quota.window.num
replication.quota.window.size.seconds request.timeout.ms reserved.broker.max.id
sasl.client.callback.handler.class sasl.enabled.mechanisms sasl.jaas.config sasl.kerberos.kinit.cmd
sasl.kerberos.min.time.before.relogin sasl.kerberos.principal.to.local.rules
sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter
sasl.kerberos.ticket.renew.window.factor sasl.login.callback.handler.class sasl.login.class
sasl.login.refresh.buffer.seconds sasl.login.refresh.min.period.seconds
sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
sasl.mechanism.inter.broker.protocol sasl.server.callback.handler.class
security.inter.broker.protocol security.providers socket.connection.setup.timeout.max.ms
socket.connection.setup.timeout.ms socket.receive.buffer.bytes socket.request.max.bytes
socket.send.buffer.bytes ssl.cipher.suites ssl.client.auth ssl.enabled.protocols
ssl.endpoint.identification.algorithm ssl.engine.factory.class ssl.key.password
ssl.keymanager.algorithm ssl.keystore.certificate.chain ssl.keystore.key ssl.keystore.location
ssl.keystore.password ssl.keystore.type ssl.principal.mapping.rules ssl.protocol ssl.provider
ssl.secure.random.implementation ssl.trustmanager.algorithm ssl.truststore.certificates
ssl.truststore.location ssl.truststore.password ssl.truststore.type
transaction.abort.timed.out.transaction.cleanup.interval.ms transaction.max.timeout.ms
transaction.remove.expired.transaction.cleanup.interval.ms transaction.state.log.load.buffer.size
transaction.state.log.min.isr transaction.state.log.num.partitions
transaction.state.log.replication.factor transaction.state.log.segment.bytes
transactional.id.expiration.ms unclean.leader.election.enable zookeeper.clientCnxnSocket
zookeeper.connect zookeeper.connection.timeout.ms zookeeper.max.in.flight.requests
zookeeper.session.timeout.ms zookeeper.set.acl zookeeper.ssl.cipher.suites
zookeeper.ssl.client.enable zookeeper.ssl.crl.enable zookeeper.ssl.enabled.protocols
zookeeper.ssl.endpoint.identification.algorithm zookeeper.ssl.keystore.location
zookeeper.ssl.keystore.password zookeeper.ssl.keystore.type zookeeper.ssl.ocsp.enable
zookeeper.ssl.protocol zookeeper.ssl.truststore.location zookeeper.ssl.truststore.password
zookeeper.ssl.truststore.type zookeeper.sync.time.ms
""".split())

#: Prefixes of Kafka 2.7 broker properties whose full names are open-ended.
KAFKA_27_BROKER_PROPERTY_PREFIXES: tuple[str, ...] = ("listener.name.",)


def is_kafka_broker_property(name: str) -> bool:
    """True when ``name`` is a broker property of Apache Kafka 2.7."""
    return name in KAFKA_27_BROKER_PROPERTIES or name.startswith(KAFKA_27_BROKER_PROPERTY_PREFIXES)
