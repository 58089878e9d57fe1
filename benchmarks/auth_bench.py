"""What an authentication costs the broker: connections that authenticate and close, with GSSAPI (Kerberos),
SCRAM-SHA-512, a delegation token (SCRAM-SHA-512 with ``tokenauth=true``) and PLAIN, against the same broker
in the same run.

``python -m benchmarks.auth_bench [--short] [--reps N] [--count N] [--json FILE]``

One broker (``python -m broker``, data in a temporary directory, a delegation token master key) with a
SASL_PLAINTEXT listener that enables the three mechanisms, and a real MIT KDC (Debian's ``krb5-kdc``, the tests' :mod:`tests.kdc`) for its
realm. The client is this process, one connection after another: connect, SaslHandshake v1, the
mechanism's SaslAuthenticate rounds (GSSAPI: the context token, the empty token, the security layer
reply; its service ticket is got once and then taken from the ticket cache, as a long-lived client's
is; SCRAM: client-first and client-final; a token: the same, its id as the user and its HMAC as the password,
the broker reading the token from its store; PLAIN: one token), close. The client's own work (SCRAM's key
derivation, the Kerberos library's) slows the rate but is not in the broker's CPU figure.

Each repetition runs the cases in turn (A B C D A B C D): ``count`` authentications each. Reported per
mechanism, medians over the repetitions: authentications per second (client and broker share the
machine) and the broker's own CPU per authentication (from /proc, every thread), and their ratios to PLAIN, the
cheapest: the figures that carry over between machines. An authentication costs once per connection;
clients keep their connections, so this matters when many connect at once (a restart of an
application fleet).

``--short``: 200 authentications each, one repetition (default: 2,000 each, 3 repetitions).
"""

from __future__ import annotations

import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._procs import OurBroker, free_port
from benchmarks._runs import alternate, arguments, write_json
from broker.protocol import ApiKey, decode_response, encode_request

MECHANISMS = ("GSSAPI", "SCRAM-SHA-512", "PLAIN")
TOKEN = "delegation token"
#: what is measured: each mechanism, and SCRAM-SHA-512 with a delegation token
CASES = ("GSSAPI", "SCRAM-SHA-512", TOKEN, "PLAIN")
USER, PASSWORD = "bench", "bench-secret"


class _Conn:
    """One socket speaking Kafka's framing."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("localhost", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def call(self, api_key: int, version: int, body: dict) -> dict:
        self.correlation += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation, "auth-bench", body))
        size = struct.unpack(">i", self._exact(4))[0]
        _cid, answer = decode_response(api_key, version, self._exact(size))
        return answer

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def authenticate(self, token: bytes) -> bytes:
        answer = self.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        if answer["error_code"]:
            raise RuntimeError(f"authentication failed: {answer.get('error_message')}")
        return bytes(answer["auth_bytes"] or b"")

    def close(self) -> None:
        self.sock.close()


def _cpu_s(pid: int) -> float:
    """CPU seconds of every thread of ``pid`` so far, to the nanosecond (``/proc/PID/task/*/schedstat``; the
    tick-counted times of ``/proc/PID/stat`` are too coarse for a few hundred short exchanges)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def _one(port: int, case: str, login, token=None) -> None:
    from broker import kerberos
    from scramp import ScramClient

    mechanism = "SCRAM-SHA-512" if case == TOKEN else case
    conn = _Conn(port)
    try:
        if conn.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})["error_code"]:
            raise RuntimeError(f"{mechanism} is not enabled")
        if mechanism == "PLAIN":
            conn.authenticate(b"\0" + USER.encode() + b"\0" + PASSWORD.encode())
        elif mechanism == "GSSAPI":
            exchange = kerberos.ClientExchange(login, "kafka", "localhost")
            token = exchange.first()
            while True:
                answer = conn.authenticate(token)
                if exchange.finished:
                    break
                token = exchange.step(answer)
        elif case == TOKEN:
            client = ScramClient([mechanism], token.token_id, token.hmac_base64)
            first = client.get_client_first() + ",tokenauth=true"
            client.client_first_bare += ",tokenauth=true"
            client.set_server_first(conn.authenticate(first.encode()).decode())
            client.set_server_final(conn.authenticate(client.get_client_final().encode()).decode())
        else:
            client = ScramClient([mechanism], USER, PASSWORD)
            client.set_server_first(conn.authenticate(client.get_client_first().encode()).decode())
            client.set_server_final(conn.authenticate(client.get_client_final().encode()).decode())
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = arguments("auth_bench", "200 authentications per mechanism, one repetition")
    parser.add_argument("--reps", type=int)
    parser.add_argument("--count", type=int)
    args = parser.parse_args(argv)
    count = args.count or (200 if args.short else 2000)
    reps = args.reps or (1 if args.short else 3)
    from tests import kdc as kdc_mod

    missing = kdc_mod.available()
    if missing:
        print(f"auth_bench: needs a KDC: {missing}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="auth-bench-"))
    kdc = kdc_mod.Kdc(work / "kdc").start()
    broker = None
    try:
        kdc.use_here()
        kdc.add_principal("kafka/localhost", work / "kafka.keytab")
        kdc.add_principal(USER, work / "bench.keytab")
        kdc.kinit(USER, work / "bench.keytab", work / "bench.ccache")
        kdc.set_ccache_here(work / "bench.ccache")
        port = free_port()
        jaas = (f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
                f'keyTab="{work / "kafka.keytab"}" principal="kafka/localhost@{kdc.realm}";')
        broker = OurBroker({
            "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://localhost:{port}",
            "sasl.enabled.mechanisms": ",".join(MECHANISMS), "sasl.kerberos.service.name": "kafka",
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": jaas,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";',
            "delegation.token.master.key": "auth-bench",
        }).start()
        from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, \
            UserScramCredentialUpsertion

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())]).values():
            future.result(timeout=30)
        del admin  # its connections go now, not when the broker stops under them
        from broker import kerberos

        from broker.client import Admin

        with Admin(bootstrap_servers=f"localhost:{port}", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                   sasl_username=USER, sasl_password=PASSWORD) as ours:
            token = ours.create_delegation_token()
        login = kerberos.KerberosLogin(None, None)  # the ticket cache, its service ticket kept there
        for case in CASES:  # warm: the service ticket, the SCRAM credential read once, the token's derived once
            _one(port, case, login, token)
        def measure(mechanism: str, _case: None, rep: int) -> dict:
            before = _cpu_s(broker.pid)
            started = time.perf_counter()
            for _ in range(count):
                _one(port, mechanism, login, token)
            elapsed = time.perf_counter() - started
            cpu = _cpu_s(broker.pid) - before
            row = {"per_s": count / elapsed, "broker_cpu_us": cpu / count * 1e6}
            print(f"  {mechanism:16s} rep {rep + 1}: {row['per_s']:,.0f}/s, broker CPU {row['broker_cpu_us']:,.0f} µs "
                  f"per authentication", flush=True)
            return row

        runs = alternate({m: None for m in CASES}, reps, measure)
    finally:
        if broker is not None:
            broker.stop()
        kdc.stop()
    medians = {m: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for m, rows in runs.items()}
    plain = medians["PLAIN"]
    print(f"\n{count:,} authentications per mechanism and repetition (connect, authenticate, close), "
          f"{reps} repetition(s), medians\n")
    print("| mechanism | authentications/s | broker CPU µs each | broker CPU / PLAIN's |")
    print("|---|---:|---:|---:|")
    for m, row in medians.items():
        print(f"| {m} | {row['per_s']:,.0f} | {row['broker_cpu_us']:,.0f} | "
              f"{row['broker_cpu_us'] / plain['broker_cpu_us']:.2f}x |")
    write_json(args.json, {"count": count, "reps": reps, "runs": runs, "medians": medians})
    return 0


if __name__ == "__main__":
    sys.exit(main())
