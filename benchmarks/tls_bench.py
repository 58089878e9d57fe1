"""What TLS costs: librdkafka producing and consuming through our broker's SSL listener against its
PLAINTEXT listener, in the same run.

``python -m benchmarks.tls_bench [--short] [--reps N] [--count N] [--json FILE]``

One broker (``python -m broker``, data in a temporary directory) with two listeners, PLAINTEXT and SSL
(a throwaway CA and certificate from ``trustme``; TLS 1.3, the broker's default ciphers). Each
repetition, A B A B, for each listener: librdkafka produces ``count`` records of 1 KB with acks=1 into
a new topic of one partition, then reads them back from offset 0. Reported per listener, medians over
the repetitions: records/s and MB/s of each, and the broker's CPU seconds per GB moved (from /proc,
across the producing and the consuming). TLS moves the broker's work from ``sendfile`` (no copy, no
CPU for the data) to reading and encrypting every fetched byte, and adds decrypting every produced
byte; the ratios TLS / PLAINTEXT are the figures that carry over between machines.

``--short``: 20,000 records, one repetition (default: 300,000 records, 3 repetitions).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks import _load
from benchmarks._procs import OurBroker, free_port
from benchmarks._runs import alternate, arguments, write_json

SIZE = 1024


def _pki(root: Path) -> dict[str, str]:
    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(root / "broker.pem"))
    return {"ca": str(root / "ca.pem"), "broker": str(root / "broker.pem")}


def main(argv: list[str] | None = None) -> int:
    parser = arguments("tls_bench", "20,000 records, one repetition")
    parser.add_argument("--reps", type=int)
    parser.add_argument("--count", type=int)
    args = parser.parse_args(argv)
    count = args.count or (20_000 if args.short else 300_000)
    reps = args.reps or (1 if args.short else 3)

    with tempfile.TemporaryDirectory(prefix="tls-bench-") as tmp:
        pki = _pki(Path(tmp))
        ssl_port = free_port()
        broker = OurBroker({"listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
                            "ssl.keystore.location": pki["broker"]})
        listeners = {
            "plaintext": {},
            "tls": {"security.protocol": "SSL", "ssl.ca.location": pki["ca"]},
        }
        try:
            broker.start()
            addresses = {"plaintext": broker.bootstrap, "tls": f"127.0.0.1:{ssl_port}"}

            def measure(name: str, client: dict, rep: int) -> dict:
                return _load.produce_and_consume_row(broker, addresses[name], f"tls-bench-{name}-{rep}", size=SIZE,
                                                     count=count, client=client, label=f"{name:9s} rep {rep + 1}")

            runs = alternate(listeners, reps, measure)
        finally:
            broker.stop()

    medians = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for name, rows in runs.items()}
    plain, tls = medians["plaintext"], medians["tls"]
    print(f"\n{count:,} records of 1 KB, acks=1, one partition; {reps} repetition(s), medians\n")
    print("| listener | produce records/s | produce MB/s | consume records/s | consume MB/s | broker CPU s/GB |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in medians.items():
        print(f"| {name} | {m['produce_rps']:,.0f} | {m['produce_mbs']:,.1f} | {m['consume_rps']:,.0f} | "
              f"{m['consume_mbs']:,.1f} | {m['cpu_s_per_gb']:.2f} |")
    print(f"\nTLS / PLAINTEXT: produce {tls['produce_rps'] / plain['produce_rps']:.2f}x, "
          f"consume {tls['consume_rps'] / plain['consume_rps']:.2f}x, "
          f"broker CPU per GB {tls['cpu_s_per_gb'] / plain['cpu_s_per_gb']:.2f}x")
    write_json(args.json, {"count": count, "reps": reps, "runs": runs, "medians": medians})
    return 0


if __name__ == "__main__":
    sys.exit(main())
