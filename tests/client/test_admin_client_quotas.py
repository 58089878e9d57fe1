"""The admin client's client quota calls (``describe_client_quotas``, ``alter_client_quotas``, KIP-546) against
our broker: every kind of entity set, described and removed, the filters (exact name, default entity, any
name, strict), ``validate_only``, the broker's refusals as the client's errors with the entity unchanged, a
user's SCRAM credential beside its quotas, and authorization (DESCRIBE_CONFIGS / ALTER_CONFIGS on the
cluster)."""

from __future__ import annotations

import pytest

from broker.client import (ANY_ENTITY, DEFAULT_ENTITY, AclBinding, Admin, ClientQuotaEntity,
                           ClientQuotaFilterComponent, UserScramCredentialUpsertion, errors)
from tests.security import acl_broker
from tests.zookeeper import free_port

D = DEFAULT_ENTITY
ALICE = ClientQuotaEntity(user="alice")
ALICE_APP = ClientQuotaEntity("alice", "app")
ALICE_DEFAULT_CLIENT = ClientQuotaEntity("alice", D)
APP = ClientQuotaEntity(client_id="app")
DEFAULT_USER = ClientQuotaEntity(user=D)
DEFAULT_USER_APP = ClientQuotaEntity(D, "app")
DEFAULT_USER_DEFAULT_CLIENT = ClientQuotaEntity(D, D)
DEFAULT_CLIENT = ClientQuotaEntity(client_id=D)
BOB = ClientQuotaEntity(user="bob")

#: One quota per entity, every kind of entity, in the order describe_client_quotas sorts them.
QUOTAS = {
    DEFAULT_CLIENT: {"consumer_byte_rate": 1000},
    APP: {"producer_byte_rate": 2000},
    DEFAULT_USER: {"request_percentage": 50.0},
    DEFAULT_USER_DEFAULT_CLIENT: {"consumer_byte_rate": 3000},
    DEFAULT_USER_APP: {"controller_mutation_rate": 2.5},
    ALICE: {"consumer_byte_rate": 2097152, "producer_byte_rate": 1048576},
    ALICE_DEFAULT_CLIENT: {"request_percentage": 12.5},
    ALICE_APP: {"producer_byte_rate": 4096},
}


def _filter(**parts) -> list[ClientQuotaFilterComponent]:
    return [ClientQuotaFilterComponent(kind.replace("_", "-"), match) for kind, match in parts.items()]


def _only(quotas: dict, *entities: ClientQuotaEntity) -> dict:
    return {e: v for e, v in quotas.items() if e in entities}


def test_every_kind_of_entity_set_described_and_removed(broker):
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.describe_client_quotas() == {}
        admin.alter_client_quotas(QUOTAS)
        described = admin.describe_client_quotas()
        assert described == QUOTAS and list(described) == list(QUOTAS)  # sorted: no part, default, names
        byte_rates = described[ALICE]
        assert all(type(v) is int for v in byte_rates.values()) and list(byte_rates) == sorted(byte_rates)
        assert type(described[DEFAULT_USER]["request_percentage"]) is float

        # a change keeps the keys it does not name; None removes a key; a float that is whole is a byte rate
        admin.alter_client_quotas({ALICE: {"producer_byte_rate": 1024.0, "consumer_byte_rate": None,
                                           "request_percentage": 80}})
        assert admin.describe_client_quotas(_filter(user="alice"), strict=True) == {
            ALICE: {"producer_byte_rate": 1024, "request_percentage": 80.0}}
        # removing every key: the entity is gone from the answer; removing a key that is not there is no error
        admin.alter_client_quotas({APP: {"producer_byte_rate": None, "consumer_byte_rate": None},
                                   DEFAULT_USER_APP: {"controller_mutation_rate": None}})
        left = admin.describe_client_quotas()
        assert APP not in left and DEFAULT_USER_APP not in left and len(left) == len(QUOTAS) - 2
        assert admin.alter_client_quotas({}) is None

    broker.restart()  # stored, as Kafka stores them
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.describe_client_quotas() == left


def test_filters(broker):
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_client_quotas(QUOTAS)
        describe = admin.describe_client_quotas
        every = list(QUOTAS)
        # exact name: the user's own entity and those of its client ids; strict: only the user's own
        assert describe(_filter(user="alice")) == _only(QUOTAS, ALICE, ALICE_DEFAULT_CLIENT, ALICE_APP)
        assert describe(_filter(user="alice"), strict=True) == _only(QUOTAS, ALICE)
        assert describe(_filter(user="alice", client_id="app")) == _only(QUOTAS, ALICE_APP)
        assert describe(_filter(client_id="app")) == _only(QUOTAS, APP, DEFAULT_USER_APP, ALICE_APP)
        assert describe(_filter(client_id="app"), strict=True) == _only(QUOTAS, APP)
        assert describe(_filter(user="nobody")) == {}
        # the default entity
        assert describe(_filter(user=D)) == _only(QUOTAS, DEFAULT_USER, DEFAULT_USER_DEFAULT_CLIENT, DEFAULT_USER_APP)
        assert describe(_filter(user=D), strict=True) == _only(QUOTAS, DEFAULT_USER)
        assert describe(_filter(client_id=D), strict=True) == _only(QUOTAS, DEFAULT_CLIENT)
        assert describe(_filter(user=D, client_id=D)) == _only(QUOTAS, DEFAULT_USER_DEFAULT_CLIENT)
        assert describe(_filter(user="alice", client_id=D)) == _only(QUOTAS, ALICE_DEFAULT_CLIENT)
        # any name, the default included (the match's default is ANY_ENTITY)
        users = [ALICE, ALICE_DEFAULT_CLIENT, ALICE_APP, DEFAULT_USER, DEFAULT_USER_DEFAULT_CLIENT, DEFAULT_USER_APP]
        assert describe(_filter(user=ANY_ENTITY)) == _only(QUOTAS, *users)
        assert describe([ClientQuotaFilterComponent("user")], strict=True) == _only(QUOTAS, ALICE, DEFAULT_USER)
        assert describe(_filter(user=ANY_ENTITY, client_id=ANY_ENTITY)) == _only(
            QUOTAS, ALICE_DEFAULT_CLIENT, ALICE_APP, DEFAULT_USER_DEFAULT_CLIENT, DEFAULT_USER_APP)
        assert describe(_filter(client_id=ANY_ENTITY), strict=True) == _only(QUOTAS, DEFAULT_CLIENT, APP)
        # no component: everything, or with strict nothing
        assert list(describe()) == every and describe(strict=True) == {}
        # a type given twice is the broker's INVALID_REQUEST
        with pytest.raises(errors.BrokerResponseError) as refused:
            describe(_filter(user="alice") + _filter(user=D))
        assert refused.value.error_name == "INVALID_REQUEST" and "DescribeClientQuotas" in str(refused.value)


def test_validate_only_writes_nothing(broker):
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_client_quotas({ALICE: {"producer_byte_rate": 1024}})
        admin.alter_client_quotas({ALICE: {"producer_byte_rate": 9999, "request_percentage": 5},
                                   APP: {"consumer_byte_rate": 2048}}, validate_only=True)
        admin.alter_client_quotas({ALICE: {"producer_byte_rate": None}}, validate_only=True)
        assert admin.describe_client_quotas() == {ALICE: {"producer_byte_rate": 1024}}
        # and is refused as the change would be
        with pytest.raises(errors.BrokerResponseError, match="INVALID_REQUEST"):
            admin.alter_client_quotas({ALICE: {"producer_byte_rate": 0.5}}, validate_only=True)


@pytest.mark.parametrize("change, says", [
    ({"produce_byte_rate": 1024}, "Invalid configuration key produce_byte_rate"),
    ({"producer_byte_rate": 1024.5}, "producer_byte_rate must be a Long value"),
    ({"consumer_byte_rate": -1}, "consumer_byte_rate must be a positive number"),
    ({"request_percentage": 0}, "request_percentage must be a positive number"),
    ({"controller_mutation_rate": float("inf")}, "controller_mutation_rate must be a positive number"),
    ({"controller_mutation_rate": float("nan")}, "controller_mutation_rate must be a positive number"),
    # one bad key refuses the whole entry: the good one is not made either
    ({"producer_byte_rate": 1, "request_percentage": -5.0}, "request_percentage must be a positive number"),
])
def test_refusals_leave_the_entity_unchanged(broker, change, says):
    before = {ALICE: {"producer_byte_rate": 1024, "request_percentage": 10.0}}
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_client_quotas(before)
        with pytest.raises(errors.BrokerResponseError) as refused:
            admin.alter_client_quotas({BOB: {"consumer_byte_rate": 4096}, ALICE: change})
        err = refused.value
        assert err.error_name == "INVALID_REQUEST" and err.error_code == 42 and not err.retriable
        assert err.context == "client quotas of user 'alice'" and says in err.error_message
        # alice unchanged; bob, in the same call, changed all the same
        assert admin.describe_client_quotas() == {**before, BOB: {"consumer_byte_rate": 4096}}


def test_what_the_client_refuses_before_sending():
    # no broker is asked: each of these is a ConfigError (a ValueError) at once
    with pytest.raises(errors.ConfigError, match="names a user, a client id or both, or an IP address"):
        ClientQuotaEntity()
    with pytest.raises(errors.ConfigError, match="non-empty name, DEFAULT_ENTITY; not ''"):
        ClientQuotaEntity(user="")
    with pytest.raises(errors.ConfigError, match="not ANY_ENTITY"):
        ClientQuotaEntity(client_id=ANY_ENTITY)
    with pytest.raises(errors.ConfigError, match="'user', 'client-id' or 'ip', not 'host'"):
        ClientQuotaFilterComponent("host", "10.0.0.1")
    with pytest.raises(errors.ConfigError, match="names an IP address alone"):
        ClientQuotaEntity(user="alice", ip="10.0.0.1")
    with pytest.raises(errors.ConfigError, match="not None"):
        ClientQuotaFilterComponent("user", None)
    assert ClientQuotaFilterComponent("client_id", "app") == ClientQuotaFilterComponent("client-id", "app")
    assert str(ClientQuotaEntity("alice", D)) == "user 'alice', default client id"
    assert str(DEFAULT_USER_APP) == "default user, client id 'app'"
    assert repr(DEFAULT_CLIENT) == "ClientQuotaEntity(user=None, client_id=DEFAULT_ENTITY, ip=None)"
    assert str(ClientQuotaEntity(ip="10.0.0.1")) == "ip '10.0.0.1'"


def test_what_the_client_refuses_before_sending_to_a_broker(broker):
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        with pytest.raises(errors.ConfigError, match="a number or None"):
            admin.alter_client_quotas({ALICE: {"producer_byte_rate": "1024"}})
        with pytest.raises(errors.ConfigError, match="a number or None"):
            admin.alter_client_quotas({ALICE: {"producer_byte_rate": True}})
        with pytest.raises(errors.ConfigError, match="per ClientQuotaEntity, not 'alice'"):
            admin.alter_client_quotas({"alice": {"producer_byte_rate": 1024}})
        with pytest.raises(errors.ConfigError, match="made of ClientQuotaFilterComponents"):
            admin.describe_client_quotas([("user", "alice")])
        assert admin.describe_client_quotas() == {}


def test_a_users_scram_credential_survives_its_quotas(broker_factory):
    """A user's quotas and SCRAM credentials share its node (/config/users/<user>): setting and removing
    quotas keeps the credential, which still authenticates; changing the credential keeps the quotas."""
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
                             "sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    carol = ClientQuotaEntity(user="carol")
    scram = {"bootstrap_servers": f"127.0.0.1:{port}", "security_protocol": "SASL_PLAINTEXT",
             "sasl_mechanism": "SCRAM-SHA-256", "sasl_username": "carol"}
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", "SCRAM-SHA-256", "pw-1", 8192)])
        admin.alter_client_quotas({carol: {"producer_byte_rate": 1048576, "request_percentage": 200}})
        assert [(c.mechanism, c.iterations) for c in
                admin.describe_user_scram_credentials(["carol"])["carol"]] == [("SCRAM-SHA-256", 8192)]
        with Admin(**scram, sasl_password="pw-1") as as_carol:
            assert as_carol.describe_cluster().brokers

        admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", "SCRAM-SHA-256", "pw-2", 4096)])
        assert admin.describe_client_quotas(_filter(user="carol")) == {
            carol: {"producer_byte_rate": 1048576, "request_percentage": 200.0}}

        admin.alter_client_quotas({carol: {"producer_byte_rate": None, "request_percentage": None}})
        assert admin.describe_client_quotas() == {}
        assert [c.iterations for c in admin.describe_user_scram_credentials(["carol"])["carol"]] == [4096]
    with Admin(**scram, sasl_password="pw-2") as as_carol:
        assert as_carol.describe_cluster().brokers


def test_authorization(broker_factory):
    """DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster, AlterClientQuotas ALTER_CONFIGS (which
    grants DESCRIBE_CONFIGS too)."""
    broker = acl_broker(broker_factory)

    def as_user(user: str) -> Admin:
        return Admin(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                     sasl_mechanism="PLAIN", sasl_username=user, sasl_password=f"{user}-secret")

    with as_user("alice") as alice:
        with pytest.raises(errors.BrokerResponseError) as refused:
            alice.describe_client_quotas()
        assert refused.value.error_name == "CLUSTER_AUTHORIZATION_FAILED"
        with pytest.raises(errors.BrokerResponseError) as refused:
            alice.alter_client_quotas({BOB: {"producer_byte_rate": 1024}})
        assert refused.value.error_name == "CLUSTER_AUTHORIZATION_FAILED"
        assert refused.value.context == "client quotas of user 'bob'"
    with as_user("admin") as admin:
        assert admin.describe_client_quotas() == {}
        admin.create_acls([AclBinding("cluster", "kafka-cluster", "literal", "User:alice", "*", "alter-configs",
                                      "allow")])
    with as_user("alice") as alice:
        alice.alter_client_quotas({BOB: {"producer_byte_rate": 1024}})
        assert alice.describe_client_quotas() == {BOB: {"producer_byte_rate": 1024}}
