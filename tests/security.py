"""Brokers with SASL and the ACL authorizer for tests: the listener layout the security tests share."""

from __future__ import annotations

from tests.zookeeper import free_port

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
#: PLAIN users of :func:`acl_broker`, each with the password ``<name>-secret``; ``admin`` is the super user.
USERS = ("admin", "alice", "bob")
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{u}-secret"' for u in USERS) + ";")


def acl_broker(broker_factory, **props):
    """A broker with the authorizer (``super.users=User:admin``): a PLAINTEXT listener (``bootstrap``,
    clients are User:ANONYMOUS) and a SASL_PLAINTEXT one with PLAIN (``sasl_bootstrap``); ``props`` override."""
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
                             "sasl.enabled.mechanisms": "PLAIN",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                             "authorizer.class.name": AUTHORIZER, "super.users": "User:admin", **props})
    broker.sasl_bootstrap = f"127.0.0.1:{port}"
    return broker
