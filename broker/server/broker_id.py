"""Which id this broker runs with: Apache Kafka's rules, checked before anything is written.

In order:

1. ``meta.properties`` in the log dirs holds the id the data was written
   under; every dir that has one must agree.
2. A configured ``broker.id`` (>= 0) must match it: data moved to a broker with
   another id is refused, as Kafka refuses it (InconsistentBrokerIdException).
3. No stored id: the configured one; with none configured (``broker.id`` -1)
   and ``broker.id.generation.enable`` (the default), on ZooKeeper a new id is
   generated from ``/brokers/seqid`` (``reserved.broker.max.id`` + the node's
   new version: 1001, 1002, ...), and it is kept in ``meta.properties`` from
   then on. The embedded single-node store has no cluster to number: broker 0.

Errors are :class:`BrokerIdError` (a ValueError) with one line for the operator.
"""

from __future__ import annotations

from pathlib import Path

from broker.cluster import ClusterMetadata
from broker.config import BrokerConfig
from broker.log.checkpoint import read_meta_properties


class BrokerIdError(ValueError):
    """The broker id cannot be settled (see the module docstring)."""


def stored_broker_id(log_dirs: list[Path]) -> int | None:
    """The ``broker.id`` of the log dirs' ``meta.properties`` (None when no dir has one)."""
    found: dict[Path, int] = {}
    for d in log_dirs:
        props = read_meta_properties(d) if d.is_dir() else None
        if props is not None and props.get("broker.id") is not None:
            try:
                found[d] = int(props["broker.id"])
            except ValueError:
                raise BrokerIdError(f"{d}/meta.properties: broker.id {props['broker.id']!r} is not an integer") from None
    if len(set(found.values())) > 1:
        listed = ", ".join(f"{d}: {i}" for d, i in found.items())
        raise BrokerIdError(f"the log dirs' meta.properties disagree on broker.id ({listed})")
    return next(iter(found.values()), None)


def resolve_broker_id(config: BrokerConfig, metadata: ClusterMetadata, log_dirs: list[Path] | None = None) -> int:
    """The id to run with (see the module docstring); may bump ``/brokers/seqid``.

    ``log_dirs``: the dirs whose ``meta.properties`` count (default every one; a broker leaves out the
    dirs that are broken at its start).
    """
    configured = config.broker_id
    stored = stored_broker_id(config.log_dirs if log_dirs is None else log_dirs)
    if configured >= 0 and stored is not None and stored != configured:
        raise BrokerIdError(
            f"configured broker.id {configured} does not match broker.id {stored} stored in meta.properties "
            f"of {', '.join(str(d) for d in config.log_dirs)}: if the data moved, configure its id; "
            f"a new broker needs empty log dirs")
    if stored is not None:
        return stored
    if configured >= 0:
        return configured
    if not metadata.store.shared:
        return 0
    if not config.broker_id_generation_enable:
        raise BrokerIdError("broker.id is not set and broker.id.generation.enable is false")
    return metadata.generate_broker_id(config.reserved_broker_max_id)
