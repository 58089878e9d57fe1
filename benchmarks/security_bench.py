"""What SASL and ACLs cost: librdkafka producing and consuming through a broker with the ACL authorizer and a
SASL/SCRAM listener, against a broker without either, in the same run.

``python -m benchmarks.security_bench [--short] [--reps N] [--count N] [--json FILE]``

Two brokers (``python -m broker``, data in temporary directories), started together:

* ``open``: no authorizer, librdkafka on its PLAINTEXT listener;
* ``secured``: ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer`` and a SASL_PLAINTEXT
  listener (SCRAM-SHA-512); the client is ``User:bench``, not a super user, allowed by ACLs (WRITE and
  READ on the prefix ``security-bench-``), so every Produce and Fetch goes through the authorizer.

Each repetition, A B A B: librdkafka produces ``count`` records of 1 KB with acks=1 into a new topic of
one partition, then reads them back from offset 0. Reported per broker, medians over the repetitions:
records/s, and each broker's own CPU seconds per GB moved (from /proc). SASL costs once per connection
(the SCRAM exchange); the authorizer one decision per topic of a request, cached until the ACLs change.
The ratios secured / open are the figures that carry over between machines.

``--short``: 20,000 records, one repetition (default: 300,000 records, 3 repetitions).
"""

from __future__ import annotations

import statistics
import sys

from benchmarks import _load
from benchmarks._procs import OurBroker, free_port
from benchmarks._runs import alternate, arguments, write_json

SIZE = 1024
PREFIX = "security-bench-"
USER, PASSWORD = "bench", "bench-secret"
ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";')


def _grant(broker: OurBroker) -> None:
    """The SCRAM user and its ACLs, made over the secured broker's PLAINTEXT listener (its operator's)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())])
    for future in futures.values():
        future.result(timeout=30)
    principal = f"User:{USER}"
    bindings = [AclBinding(ResourceType.TOPIC, PREFIX, ResourcePatternType.PREFIXED, principal, "*", op,
                           AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]
    bindings.append(AclBinding(ResourceType.GROUP, "bench-", ResourcePatternType.PREFIXED, principal, "*",
                               AclOperation.READ, AclPermissionType.ALLOW))
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = arguments("security_bench", "20,000 records, one repetition")
    parser.add_argument("--reps", type=int)
    parser.add_argument("--count", type=int)
    args = parser.parse_args(argv)
    count = args.count or (20_000 if args.short else 300_000)
    reps = args.reps or (1 if args.short else 3)

    sasl_port = free_port()
    brokers = {
        "open": OurBroker(),
        "secured": OurBroker({
            "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # the operator's loopback listener (PLAINTEXT: User:ANONYMOUS) and admin are super users
            "super.users": "User:ANONYMOUS;User:admin",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": ADMIN_JAAS,
        }),
    }
    clients = {
        "open": {},
        "secured": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.username": USER, "sasl.password": PASSWORD},
    }
    try:
        for broker in brokers.values():
            broker.start()
        _grant(brokers["secured"])
        addresses = {"open": brokers["open"].bootstrap, "secured": f"127.0.0.1:{sasl_port}"}

        def measure(name: str, client: dict, rep: int) -> dict:
            return _load.produce_and_consume_row(brokers[name], addresses[name], f"{PREFIX}{name}-{rep}", size=SIZE,
                                                 count=count, client=client, label=f"{name:8s} rep {rep + 1}")

        runs = alternate(clients, reps, measure)
    finally:
        for broker in brokers.values():
            broker.stop()

    medians = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for name, rows in runs.items()}
    plain, secured = medians["open"], medians["secured"]
    print(f"\n{count:,} records of 1 KB, acks=1, one partition; {reps} repetition(s), medians\n")
    print("| broker | produce records/s | produce MB/s | consume records/s | consume MB/s | broker CPU s/GB |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in medians.items():
        print(f"| {name} | {m['produce_rps']:,.0f} | {m['produce_mbs']:,.1f} | {m['consume_rps']:,.0f} | "
              f"{m['consume_mbs']:,.1f} | {m['cpu_s_per_gb']:.2f} |")
    print(f"\nsecured / open: produce {secured['produce_rps'] / plain['produce_rps']:.2f}x, "
          f"consume {secured['consume_rps'] / plain['consume_rps']:.2f}x, "
          f"broker CPU per GB {secured['cpu_s_per_gb'] / plain['cpu_s_per_gb']:.2f}x")
    write_json(args.json, {"count": count, "reps": reps, "runs": runs, "medians": medians})
    return 0


if __name__ == "__main__":
    sys.exit(main())
