"""Broker benchmark: our broker against tansu, measured in the same run.

``python -m benchmarks.broker_bench [--short] [--reps N] [--only REGEX] [--json FILE]``

Both brokers are started as child processes on 127.0.0.1 (ephemeral ports,
data in a temporary directory that is removed afterwards) and stay up for the
whole run. Every case runs on one broker, then the other, and again (A B A B
for each repetition), so drift of the machine hits both; each case gets a new
topic created with AdminClient. The load generator is confluent-kafka in this
process (see ``benchmarks._load``). Figures per case are the median over the
repetitions (three by default); the ratio column is ours / tansu. On our broker
each case's topic is deleted afterwards (``--keep-topics`` keeps them), except
the volume case's. tansu 0.6 exits when a topic is deleted from its memory
engine, so its topics are kept and it is restarted (empty) before a case
whenever its RSS is above ``--tansu-max-rss-mb``. A broker that exits during
the run is restarted and the run goes on; the report says so.

Cases (counts are for the default full run; ``--short`` divides them by ten and
runs each latency rate for 2 s):

* produce: 1 KB and 100 B records x acks=1 and acks=all x compression none
  and lz4, one partition, linger.ms=5; plus 1 KB on six partitions.
* consume: 1 KB (one and six partitions) and 100 B records, read from offset 0
  with ``assign()`` after an untimed fill.
* latency: 1 KB records, acks=all, linger.ms=5, at 1k/s, 10k/s and 50k/s for
  10 s each; p50 and p99 of the per-record delivery-report latency, and of
  the request round trip librdkafka measured (its statistics). Then end to
  end, as Kafka's EndToEndLatency tool: one 1 KB record at a time (acks=all,
  linger 0) until a consumer with librdkafka's default ``fetch.wait.max.ms``
  (500) holds it, 2,000 records or 20 s (short: 300 or 4 s); p50 and p99 of
  that time. Then the broker alone: Produce requests of five 1 KB records (acks=all) one at a time
  over a plain socket, 200 a second, 2,000 of them (short: 400): p50 and p99
  of the round trip and the broker's context switches per request.
* volume: 2 GB (short: 50 MB) of 1 KB records, then the brokers' RSS and the
  bytes our broker holds on disk.

For every case the brokers' CPU (user+sys from /proc/PID/stat over the timed
part, as a share of one core and in seconds per GB of payload) and peak RSS (VmHWM, reset before each
case) are recorded. The machine's sequential disk write and loopback TCP
throughput are measured first, as context.

Targets, ratios to tansu: 1 KB produce >= 1.0, 1 KB consume >= 1.2,
p99 latency at 1k/s and at 10k/s <= 1.0 each; our RSS < 300 MB whatever is on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from benchmarks import _load
from benchmarks._context import disk_write_mb_s, interpreter, loopback_mb_s
from benchmarks._procs import BrokerBase, OurBroker, TansuBroker, set_nice

MB = 1e6


@dataclass
class Case:
    """One benchmark case: ``run(broker, topic, meter)`` returns a dict of figures.

    The topic exists (``partitions`` of them) when ``run`` is called; ``meter``
    measures the broker's CPU from its creation, or from ``meter.start()`` when
    the case first does untimed set-up.
    """

    name: str
    kind: str  # produce | consume | latency | volume
    partitions: int
    run: Callable[[BrokerBase, str, "Meter"], dict]
    reps: int | None = None  # None: the run's --reps
    keep: bool = False  # keep the topic afterwards (the volume case: RSS with data on disk)


class Meter:
    """The broker's CPU over the timed part of a case: ``start()`` (again) after untimed set-up."""

    def __init__(self, broker: BrokerBase) -> None:
        self.stats = broker.stats
        self.start()

    def start(self) -> None:
        self.before = self.stats.snapshot()
        self.started = time.perf_counter()

    def figures(self) -> dict:
        wall = time.perf_counter() - self.started
        after = self.stats.snapshot()
        cpu_s = after.cpu_s - self.before.cpu_s
        return {"cpu_s": cpu_s, "cpu_pct": cpu_s / wall * 100,
                "peak_rss_mb": after.hwm_bytes / MB, "rss_mb": after.rss_bytes / MB}


@dataclass
class Sample:
    broker: str
    rep: int
    figures: dict = field(default_factory=dict)
    error: str = ""


def build_cases(short: bool) -> list[Case]:
    scale = 10 if short else 1
    cases: list[Case] = []
    counts = {1024: 600_000 // scale, 100: 3_000_000 // scale}
    for size in (1024, 100):
        for acks in ("1", "all"):
            for codec in ("none", "lz4"):
                def run(b, topic, _meter, size=size, acks=acks, codec=codec):
                    r = _load.produce_throughput(b.bootstrap, topic, size=size, count=counts[size],
                                                 acks=acks, compression=codec)
                    return _throughput(r)
                label = "1KB" if size == 1024 else "100B"
                cases.append(Case(f"produce {label} acks={acks} {codec}", "produce", 1, run))
    cases.append(Case("produce 1KB acks=1 none 6p", "produce", 6, lambda b, t, _m: _throughput(
        _load.produce_throughput(b.bootstrap, t, size=1024, count=counts[1024]))))

    fills = {1024: 1_000_000 // scale, 100: 3_000_000 // scale}
    for size, parts in ((1024, 1), (1024, 6), (100, 1)):
        def run(b, topic, meter, size=size, parts=parts):
            fill = _load.produce_throughput(b.bootstrap, topic, size=size, count=fills[size])
            if fill.errors:
                raise RuntimeError(f"fill failed: {fill.errors} errors, {fill.first_error}")
            meter.start()
            return _throughput(_load.consume_throughput(b.bootstrap, topic, parts, fill.records))
        label = "1KB" if size == 1024 else "100B"
        cases.append(Case(f"consume {label} {parts}p", "consume", parts, run))

    duration = 2.0 if short else 10.0
    for rate in (1_000, 10_000, 50_000):
        def run(b, topic, _meter, rate=rate):
            r = _load.produce_latency(b.bootstrap, topic, rate=rate, duration_s=duration)
            figures = {"p50_ms": r.percentile(0.5) * 1e3, "p99_ms": r.percentile(0.99) * 1e3,
                       "send_rate": r.send_rate, "errors": r.errors, "records": len(r.latencies_s)}
            if r.rtt_s is not None:
                figures["rtt_p50_ms"], figures["rtt_p99_ms"] = r.rtt_s[0] * 1e3, r.rtt_s[1] * 1e3
            return figures
        cases.append(Case(f"latency 1KB acks=all {rate // 1000}k/s", "latency", 1, run))

    # End to end, as Kafka's EndToEndLatency tool: one record at a time from produce() to a consumer with
    # librdkafka's default fetch.wait.max.ms (500), whose fetch waits at the broker for the record.
    def run_end_to_end(b, topic, _meter):
        r = _load.end_to_end_latency(b.bootstrap, topic, count=300 if short else 2000, max_s=4.0 if short else 20.0)
        if r.errors:  # the run stopped at a record not acknowledged or not read: its figures would mislead
            raise RuntimeError(f"stopped after {len(r.latencies_s)} records: a record was not acknowledged "
                               f"or not read in time")
        return {"p50_ms": r.percentile(0.5) * 1e3, "p99_ms": r.percentile(0.99) * 1e3, "records": len(r.latencies_s)}
    cases.append(Case("end to end 1KB acks=all", "latency", 1, run_end_to_end))

    # The broker alone: what librdkafka's linger.ms=5 makes of 1k records/s (a request of 5 records every
    # 5 ms), timed request by request, with the broker's context switches per request (wake-ups of its
    # threads: each one waits for a CPU when the machine is busy, so this count does not depend on load).
    def run_round_trips(b, topic, _meter):
        before = b.stats.context_switches()
        r = _load.produce_round_trips(b.bootstrap, topic, rate=200, count=400 if short else 2000)
        after = b.stats.context_switches()
        n = r.sent + 20  # the warm-up requests are counted too
        return {"p50_ms": r.percentile(0.5) * 1e3, "p99_ms": r.percentile(0.99) * 1e3, "errors": r.errors,
                "records": len(r.latencies_s), "cs_voluntary_per_request": (after[0] - before[0]) / n,
                "cs_involuntary_per_request": (after[1] - before[1]) / n}
    cases.append(Case("round trip 5x1KB acks=all 200 req/s", "latency", 1, run_round_trips))

    volume = (50 if short else 2000) * 1_000_000

    def run_volume(b, topic, _meter):
        r = _load.produce_throughput(b.bootstrap, topic, size=1024, count=volume // 1024, max_s=600)
        figures = _throughput(r)
        figures["disk_bytes"] = b.data_bytes()
        return figures
    cases.append(Case(f"volume {volume // 1_000_000} MB 1KB", "volume", 1, run_volume, reps=1, keep=True))
    return cases


def _throughput(r) -> dict:
    return {"records_s": r.records_s, "mb_s": r.mb_s, "records": r.records,
            "errors": r.errors, "elapsed_s": r.elapsed_s}


def run_case(case: Case, broker: BrokerBase, rep: int, keep: bool = False) -> Sample:
    sample = Sample(broker.name, rep)
    topic = re.sub(r"[^A-Za-z0-9]+", "-", f"bench-{case.name}-{rep}").strip("-")
    try:
        got = _load.create_topic(broker.bootstrap, topic, case.partitions)
        if got != case.partitions:
            print(f"  warning: {broker.name} made {topic} with {got} partitions, not {case.partitions}",
                  file=sys.stderr)
        broker.stats.reset_peak()
        meter = Meter(broker)
        sample.figures = case.run(broker, topic, meter)
        sample.figures.update(meter.figures(), partitions=got)
    except Exception as exc:  # one failed case must not end the run
        sample.error = f"{type(exc).__name__}: {exc}"
    if not (keep or case.keep) and broker.deletes_topics:
        try:
            _load.delete_topic(broker.bootstrap, topic)
        except Exception as exc:
            print(f"  note: could not delete {topic} on {broker.name}: {exc}", file=sys.stderr)
    return sample


def by_rep(samples: list[Sample], key: str) -> dict[int, float]:
    """``key``'s figure of each repetition that measured it (failed samples left out)."""
    return {s.rep: s.figures[key] for s in samples if not s.error and key in s.figures}


def median(samples: list[Sample], key: str) -> float | None:
    values = list(by_rep(samples, key).values())
    return statistics.median(values) if values else None


def _cpu_per_gb(samples: list[Sample]) -> float | None:
    """Broker CPU seconds per GB of record payload: less sensitive to a busy machine than rates."""
    values = [s.figures["cpu_s"] / (s.figures["records"] * s.figures["mb_s"] / s.figures["records_s"] / 1e3)
              for s in samples if not s.error and s.figures.get("records") and s.figures.get("records_s")]
    return statistics.median(values) if values else None


def _fmt(v, digits: int = 0) -> str:
    if v is None:
        return "-"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def _times(r: float) -> str:
    """A ratio as ``1.02x``; two significant digits below 0.1 (``0.0022x``), so it never reads 0."""
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"


def _ratio(a, b) -> str:
    return _times(a / b) if a is not None and b else "-"


def rep_pairs(samples: dict[str, list[Sample]], key: str) -> list[tuple[int, float, float]]:
    """``(rep, ours, tansu)`` for every repetition in which both brokers measured ``key``.

    Within a repetition our broker runs first and tansu right after it, so a
    pair shares the machine's state more closely than the two medians do.
    """
    ours, tansu = by_rep(samples.get("ours", []), key), by_rep(samples.get("tansu", []), key)
    return [(rep, ours[rep], tansu[rep]) for rep in sorted(ours) if rep in tansu and tansu[rep]]


def render(context: dict, results: dict[str, dict[str, list[Sample]]], cases: list[Case]) -> str:
    lines = [
        f"Machine: disk sequential write {context['disk_mb_s']:,.0f} MB/s, "
        f"loopback TCP {context['loopback_mb_s']:,.0f} MB/s; 1-min load average "
        f"{context['loadavg_start']:.1f} at start, {context.get('loadavg_end', float('nan')):.1f} at end"
        f"; nice {context['nice']}",
        f"Our broker's interpreter: {context['python']}",
        "",
        "| case | ours rec/s | ours MB/s | tansu rec/s | tansu MB/s | ours/tansu "
        "| ours CPU % | tansu CPU % | ours CPU s/GB | tansu CPU s/GB | ours peak RSS MB | tansu peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lat_lines = [
        "| case | ours p50 ms | ours p99 ms | tansu p50 ms | tansu p99 ms | p99 ours/tansu "
        "| ours CPU % | tansu CPU % | ours peak RSS MB | tansu peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    errors = []
    for case in cases:
        per = results.get(case.name)
        if not per:
            continue
        o, t = per.get("ours", []), per.get("tansu", [])
        label = case.name
        for s in o + t:
            if s.error:
                errors.append(f"- {case.name} [{s.broker} rep {s.rep}]: {s.error}")
            elif s.figures.get("partitions", case.partitions) != case.partitions:
                label = f"{case.name} (*)"
                errors.append(f"- {case.name} [{s.broker} rep {s.rep}]: topic had {s.figures['partitions']} "
                              f"partitions, not {case.partitions} (no CreateTopics: auto-created)")
        common = [_fmt(median(o, "cpu_pct")), _fmt(median(t, "cpu_pct")),
                  _fmt(median(o, "peak_rss_mb")), _fmt(median(t, "peak_rss_mb"))]
        if case.kind == "latency":
            row = [label, _fmt(median(o, "p50_ms"), 2), _fmt(median(o, "p99_ms"), 2),
                   _fmt(median(t, "p50_ms"), 2), _fmt(median(t, "p99_ms"), 2),
                   _ratio(median(o, "p99_ms"), median(t, "p99_ms")), *common]
            lat_lines.append("| " + " | ".join(row) + " |")
        else:
            row = [label, _fmt(median(o, "records_s")), _fmt(median(o, "mb_s"), 1),
                   _fmt(median(t, "records_s")), _fmt(median(t, "mb_s"), 1),
                   _ratio(median(o, "records_s"), median(t, "records_s")), *common[:2],
                   _fmt(_cpu_per_gb(o), 2), _fmt(_cpu_per_gb(t), 2), *common[2:]]
            lines.append("| " + " | ".join(row) + " |")
            if case.kind == "volume":
                disk = median(o, "disk_bytes")
                vol = f"after {case.name}: ours RSS {_fmt(median(o, 'rss_mb'))} MB"
                vol += f" (peak {_fmt(median(o, 'peak_rss_mb'))} MB) with {_fmt(disk and disk / MB)} MB on disk"
                vol += f"; tansu RSS {_fmt(median(t, 'rss_mb'))} MB (memory storage)"
    out = lines + [""] + lat_lines
    for case in cases:
        o, t = results.get(case.name, {}).get("ours", []), results.get(case.name, {}).get("tansu", [])
        if median(o, "rtt_p50_ms") is not None or median(t, "rtt_p50_ms") is not None:
            out.append(f"librdkafka's request round trip in {case.name} (p50 / p99 ms): ours "
                       f"{_fmt(median(o, 'rtt_p50_ms'), 3)} / {_fmt(median(o, 'rtt_p99_ms'), 3)}, tansu "
                       f"{_fmt(median(t, 'rtt_p50_ms'), 3)} / {_fmt(median(t, 'rtt_p99_ms'), 3)}")
        pairs = rep_pairs(results.get(case.name, {}), "p99_ms") if case.kind == "latency" else []
        if len(pairs) > 1:
            ratios = [a / b for _, a, b in pairs]
            shown = ", ".join(f"{a:.2f} / {b:.2f}" for _, a, b in pairs)
            out.append(f"p99 rep by rep in {case.name}, ours / tansu ms: {shown}; pair ratios "
                       f"{_times(min(ratios))[:-1]}-{_times(max(ratios))}, median {_times(statistics.median(ratios))}")
        if median(o, "cs_voluntary_per_request") is not None or median(t, "cs_voluntary_per_request") is not None:
            out.append(f"context switches per request in {case.name} (voluntary / involuntary): ours "
                       f"{_fmt(median(o, 'cs_voluntary_per_request'), 2)} / "
                       f"{_fmt(median(o, 'cs_involuntary_per_request'), 2)}, tansu "
                       f"{_fmt(median(t, 'cs_voluntary_per_request'), 2)} / "
                       f"{_fmt(median(t, 'cs_involuntary_per_request'), 2)}")
    if any(c.kind == "volume" and c.name in results for c in cases):
        out += ["", vol]
    out += ["", *targets(results, cases)]
    if errors:
        out += ["", "Errors and notes:", *errors]
    return "\n".join(out)


def targets(results, cases) -> list[str]:
    """The issue's targets, each with the figures it was judged on."""
    out = ["Targets (ours / tansu):"]

    def ratios(kind: str, pattern: str, key: str) -> list[tuple[str, float]]:
        found = []
        for case in cases:
            if case.kind == kind and re.search(pattern, case.name) and case.name in results:
                o = median(results[case.name].get("ours", []), key)
                t = median(results[case.name].get("tansu", []), key)
                if o is not None and t:
                    found.append((case.name, o / t))
        return found

    def judge(label: str, found, ok: Callable[[float], bool]) -> None:
        if not found:
            out.append(f"- {label}: not measured")
            return
        worst = min(found, key=lambda f: f[1]) if ok(2.0) else max(found, key=lambda f: f[1])
        verdict = "met" if all(ok(r) for _, r in found) else "NOT met"
        out.append(f"- {label}: {verdict} (worst {worst[1]:.2f}x, {worst[0]})")

    judge("1 KB produce >= 1.0x", ratios("produce", "1KB", "records_s"), lambda r: r >= 1.0)
    judge("1 KB consume >= 1.2x", ratios("consume", "1KB", "records_s"), lambda r: r >= 1.2)
    for rate in ("1k", "10k"):
        judge(f"p99 latency at {rate}/s <= 1.0x", ratios("latency", rf"\b{rate}/s", "p99_ms"), lambda r: r <= 1.0)
    peaks = [(c.name, s.figures["peak_rss_mb"]) for c in cases for s in results.get(c.name, {}).get("ours", [])
             if not s.error]
    if peaks:
        name, peak = max(peaks, key=lambda p: p[1])
        out.append(f"- our RSS < 300 MB: {'met' if peak < 300 else 'NOT met'} (peak {peak:.0f} MB, {name})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.broker_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="CI smoke form: small counts, 2 s per rate")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per case (default 3, short 1)")
    parser.add_argument("--tansu-max-rss-mb", type=float, default=2000,
                        help="restart tansu before a case when its RSS is above this (it keeps all data in memory)")
    parser.add_argument("--only", metavar="REGEX", help="run only cases whose name matches")
    parser.add_argument("--brokers", default="ours,tansu", help="comma-separated: ours,tansu")
    parser.add_argument("--keep-topics", action="store_true",
                        help="keep every case's topic (default: delete it after the case, except volume's)")
    parser.add_argument("--json", metavar="FILE", help="also write every sample as JSON")
    parser.add_argument("--data-dir", metavar="DIR", help="parent of the temporary broker directories")
    parser.add_argument("--nice", type=int, default=0,
                        help="niceness for the load generator and both brokers (negative needs root)")
    parser.add_argument("--tansu", metavar="PATH", help="tansu binary (default .cache/tansu/tansu)")
    parser.add_argument("--python", metavar="PATH", default=sys.executable,
                        help="the Python that runs our broker (default: this one); it needs the project installed")
    args = parser.parse_args(argv)
    reps = args.reps or (1 if args.short else 3)
    cases = [c for c in build_cases(args.short) if not args.only or re.search(args.only, c.name)]
    wanted = [b.strip() for b in args.brokers.split(",") if b.strip()]

    set_nice(args.nice)
    scale = 8 if args.short else 1
    context = {
        "nice": args.nice,
        "loadavg_start": os.getloadavg()[0],
        "disk_mb_s": disk_write_mb_s(args.data_dir, (1 << 30) // scale),
        "loopback_mb_s": loopback_mb_s((2 << 30) // scale),
        "python": interpreter(args.python),
    }
    print(f"context: disk {context['disk_mb_s']:,.0f} MB/s, loopback {context['loopback_mb_s']:,.0f} MB/s, "
          f"our broker's interpreter {context['python']}", flush=True)

    brokers: list[BrokerBase] = []
    try:
        for name in wanted:
            if name == "ours":
                brokers.append(OurBroker(python=args.python, data_root=args.data_dir).start())
            elif name == "tansu":
                brokers.append((TansuBroker(args.tansu) if args.tansu else TansuBroker()).start())
            else:
                parser.error(f"unknown broker {name!r}")
        results: dict[str, dict[str, list[Sample]]] = {}
        notes: list[str] = []
        for case in cases:
            per = results.setdefault(case.name, {})
            for rep in range(case.reps or reps):
                for i, broker in enumerate(brokers):
                    if not broker.running():
                        note = f"{broker.name} broker exited (status {broker.proc.returncode}) before " \
                               f"{case.name} rep {rep}; restarted empty. Its stderr ends:\n{broker.stderr_tail(5)}"
                        print(note, flush=True)
                        notes.append(note)
                        broker.stop()
                        broker = brokers[i] = broker.fresh().start()
                    elif broker.name == "tansu" and broker.stats.snapshot().rss_bytes > args.tansu_max_rss_mb * MB:
                        print(f"restarting tansu (RSS above {args.tansu_max_rss_mb:.0f} MB)", flush=True)
                        broker.stop()
                        broker = brokers[i] = broker.fresh().start()
                    sample = run_case(case, broker, rep, keep=args.keep_topics)
                    per.setdefault(broker.name, []).append(sample)
                    shown = sample.error or ", ".join(
                        f"{k}={v:,.2f}" for k, v in sample.figures.items() if isinstance(v, float))
                    print(f"{case.name} [{broker.name} {rep}] {shown}", flush=True)
        context["loadavg_end"] = os.getloadavg()[0]
        print()
        print(render(context, results, cases))
        for note in notes:
            print(f"- {note}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"context": context, "short": args.short, "reps": reps, "notes": notes,
                           "results": {c: {b: [s.__dict__ for s in ss] for b, ss in per.items()}
                                       for c, per in results.items()}}, f, indent=1)
    finally:
        for broker in brokers:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
