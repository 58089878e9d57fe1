"""How much of a low-rate produce round trip is our work: the broker against bare servers built from its pieces.

``python -m benchmarks.produce_floor [--short] [--reps N] [--rate N] [--duration S] [--servers LIST]``

At 1k records/s librdkafka (1 KB records, acks=all, ``linger.ms=5``) sends one
Produce every 5 ms, and the broker's share of a record's latency is one
request's round trip. To tell how much of ours is our own work and how much
any Python server on asyncio spends, the same load runs, A B C ... interleaved,
against these servers (``--servers``, in this order by default):

- ``loop``: a bare asyncio server built from our ``FrameDecoder`` and codec. It
  answers ApiVersions, Metadata (one partition of any topic, led by itself)
  and Produce, whose one batch it gives the next offset and writes with
  ``pwritev`` on the loop; nothing is checked;
- ``thread``: the same, the ``pwritev`` on one thread, handed over and back
  with two bare locks;
- ``log``: the same, that thread running our ``Log.append_group`` (offsets,
  index entries, roll checks, epochs, producer state) instead;
- ``appender``: the same, through our ``LogAppender`` and ``AppendHandback``
  (the broker's prompt hand-over: the CRC check, co-location, a bounded wait)
  instead of the two locks;
- ``ours``: the broker (``python -m broker``, defaults, data in a temporary
  directory);
- ``tansu``: the Rust peer (``.cache/tansu``), memory storage.

Per server, medians over the repetitions: librdkafka's request round trip
(p50 and p99 of its statistics windows), the records' latency (p50, p99 of
``Message.latency()``) and p99 against tansu's. Each step down the list adds
one piece of the broker, so the differences of adjacent round trips say what
that piece costs at this rate. The bare servers are measuring instruments, not
brokers: they serve one partition, keep no state across restarts and would
take any bytes as a batch.

``--short``: 2 repetitions of 3 s (the default: 3 of 10 s).

``python -m benchmarks.produce_floor serve --mode MODE --dir DIR`` runs one bare
server on 127.0.0.1 (port 0) and prints ``floor ready: listener=127.0.0.1:PORT``;
SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import struct
import subprocess
import sys
import threading
from pathlib import Path

from benchmarks import _load
from benchmarks._procs import START_LIMIT_S, BrokerBase, OurBroker, ProcStats, TansuBroker, _preexec, _read_line
from benchmarks._runs import alternate

BARE_MODES = ("loop", "thread", "log", "appender")
SERVERS = BARE_MODES + ("ours", "tansu")
_COUNT_AT = 57  # a v2 batch's record count: after baseOffset..baseSequence
_VERSIONS = {0: (3, 8), 1: (4, 11), 2: (1, 5), 3: (0, 8), 18: (0, 3)}  # librdkafka needs Fetch v4+ for v2 batches


class _Bare(asyncio.BufferedProtocol):
    """One connection of the bare server (see the module docstring)."""

    def __init__(self, server: "_BareServer") -> None:
        from broker.protocol import FrameDecoder

        self.server = server
        self.decoder = FrameDecoder(100 << 20)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        from broker.protocol.messages import decode_request, encode_response

        for frame in self.decoder.buffer_updated(nbytes):
            header, body = decode_request(frame)
            for part in encode_response(header, self.server.answer(header.api_key, body)):
                self.transport.write(part)


class _BareServer:
    """The bare server's state: one partition's file and next offset, and how it writes."""

    def __init__(self, mode: str, directory: Path) -> None:
        self.mode = mode
        self.port = 0
        self.position = 0
        self.next_offset = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        if mode in ("loop", "thread"):
            self.fd = os.open(directory / "partition.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        else:
            from broker.log import Log, LogConfig

            self.log = Log.open(directory / "t-0", LogConfig())
        if mode in ("thread", "log"):
            self._job = None
            self._result = None
            self._wake = threading.Lock()
            self._wake.acquire()
            self._done = threading.Lock()
            self._done.acquire()
            threading.Thread(target=self._write_loop, daemon=True).start()
        elif mode == "appender":
            from broker.log.appender import LogAppender
            from broker.replica.handback import PROMPT_WAIT_S, AppendHandback

            self.handback = AppendHandback(_settle)
            self.appender = LogAppender("floor", deliver=self.handback.deliver)
            self.prompt_wait_s = PROMPT_WAIT_S

    def _hand_over(self, records: memoryview):
        """``thread`` and ``log``: give ``records`` to the writer thread, wait for it; its result."""
        self._job = records
        self._wake.release()
        self._done.acquire()
        return self._result

    def _write_loop(self) -> None:
        while True:
            self._wake.acquire()
            if self.mode == "thread":
                os.pwritev(self.fd, [self._job], self.position)
            else:
                self._result = self.log.append_group([(self._job, 0)], crc_checked=True)[0]
            self._done.release()

    def answer(self, api_key: int, body: dict) -> dict:
        if api_key == 18:
            return {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
                {"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in _VERSIONS.items()]}
        if api_key == 3:
            names = [t["name"] for t in body["topics"] or ()] or ["t"]
            return {"throttle_time_ms": 0, "cluster_id": "floor", "controller_id": 0,
                    "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": self.port, "rack": None}],
                    "topics": [{"error_code": 0, "name": name, "is_internal": False, "partitions": [
                        {"error_code": 0, "partition_index": 0, "leader_id": 0, "leader_epoch": 0,
                         "replica_nodes": [0], "isr_nodes": [0], "offline_replicas": []}]} for name in names]}
        if api_key != 0:
            raise ValueError(f"the bare server answers no api key {api_key}")
        topic = body["topic_data"][0]
        records = memoryview(topic["partition_data"][0]["records"])
        base = self._append(records)
        return {"throttle_time_ms": 0, "responses": [{"name": topic["name"], "partition_responses": [
            {"index": 0, "error_code": 0, "base_offset": base, "log_append_time_ms": -1, "log_start_offset": 0,
             "record_errors": [], "error_message": None}]}]}

    def _append(self, records: memoryview) -> int:
        """Write one batch; its base offset."""
        mode = self.mode
        if mode in ("log", "appender"):
            if mode == "log":
                info = self._hand_over(records)
            else:
                fut = self.loop.create_future()
                if self.appender.submit(self.log, records, 0, fut, will_wait=True):
                    self.handback.wait(fut, self.prompt_wait_s)
                if not fut.done():  # not prompt, or the wait ran out: wait here (a measuring instrument)
                    self.handback.wait(fut, 60.0)
                info = fut.result()
            if isinstance(info, BaseException):
                raise info
            return info.first_offset
        base = self.next_offset
        struct.pack_into(">q", records, 0, base)
        if mode == "loop":
            os.pwritev(self.fd, [records], self.position)
        else:
            self._hand_over(records)
        self.position += len(records)
        self.next_offset += struct.unpack_from(">i", records, _COUNT_AT)[0]
        return base


def _settle(results: list) -> None:
    for fut, result in results:
        if not fut.done():
            fut.set_result(result)


async def _serve(mode: str, directory: Path) -> None:
    loop = asyncio.get_running_loop()
    server = _BareServer(mode, directory)
    server.loop = loop
    if mode == "appender":
        server.handback.loop = loop
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    listener = await loop.create_server(lambda: _Bare(server), "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    print(f"floor ready: listener=127.0.0.1:{server.port}", flush=True)
    await stop.wait()
    listener.close()


class FloorServer(BrokerBase):
    """``python -m benchmarks.produce_floor serve``: one bare server as a child process."""

    deletes_topics = False

    def __init__(self, mode: str) -> None:
        self.name = mode
        super().__init__()
        self.mode = mode

    def start(self) -> "FloorServer":
        with open(self.workdir / "stderr.log", "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.produce_floor", "serve", "--mode", self.mode,
                 "--dir", str(self.workdir)],
                stdout=subprocess.PIPE, stderr=err, preexec_fn=_preexec(self.nice),
            )
        line = _read_line(self.proc, START_LIMIT_S)
        if not line.startswith("floor ready: listener="):
            self.stop()
            raise RuntimeError(f"bare server {self.mode} did not start: {line!r}\n{self.stderr_tail()}")
        self.port = int(line.rsplit(":", 1)[1])
        self.stats = ProcStats(self.proc.pid)
        return self


def _start(name: str) -> BrokerBase:
    if name == "ours":
        return OurBroker().start()
    if name == "tansu":
        return TansuBroker().start()
    return FloorServer(name).start()


def _measure(name: str, rate: int, duration_s: float, topic: str) -> tuple[float, ...]:
    server = _start(name)
    try:
        if name in ("ours", "tansu"):
            _load.create_topic(server.bootstrap, topic, 1)
        before = server.stats.snapshot()
        result = _load.produce_latency(server.bootstrap, topic, rate=rate, duration_s=duration_s)
        after = server.stats.snapshot()
        if result.errors or not result.latencies_s or result.rtt_s is None:
            raise RuntimeError(f"{name}: {result.errors} failed deliveries, {len(result.latencies_s)} delivered")
        return (result.rtt_s[0] * 1e3, result.rtt_s[1] * 1e3, result.percentile(0.5) * 1e3,
                result.percentile(0.99) * 1e3, (after.cpu_s - before.cpu_s) / duration_s * 100)
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["serve"]:
        parser = argparse.ArgumentParser(prog="produce_floor serve")
        parser.add_argument("--mode", choices=BARE_MODES, required=True)
        parser.add_argument("--dir", type=Path, required=True)
        opts = parser.parse_args(args[1:])
        asyncio.run(_serve(opts.mode, opts.dir))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="2 repetitions of 3 s")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 3)")
    parser.add_argument("--rate", type=int, default=1000, help="records per second (default 1000)")
    parser.add_argument("--duration", type=float, default=None, help="seconds per run (default 10)")
    parser.add_argument("--servers", default=",".join(SERVERS), help=f"comma-separated, of {', '.join(SERVERS)}")
    opts = parser.parse_args(args)
    servers = [s for s in opts.servers.split(",") if s]
    unknown = [s for s in servers if s not in SERVERS]
    if unknown or not servers:
        parser.error(f"unknown server(s) {', '.join(unknown)}; known: {', '.join(SERVERS)}")
    reps = opts.reps or (2 if opts.short else 3)
    duration = opts.duration or (3.0 if opts.short else 10.0)

    def measure(name: str, _case, rep: int) -> tuple[float, ...]:
        row = _measure(name, opts.rate, duration, f"floor-{rep}")
        print(f"{name} {rep}: round trip p50 {row[0]:.3f} ms p99 {row[1]:.3f} ms, "
              f"records p50 {row[2]:.2f} ms p99 {row[3]:.2f} ms, CPU {row[4]:.1f} %", flush=True)
        return row

    rows = alternate(dict.fromkeys(servers), reps, measure)
    medians = {name: [statistics.median(col) for col in zip(*r)] for name, r in rows.items()}
    tansu_p99 = medians["tansu"][3] if "tansu" in medians else None
    print(f"\n{opts.rate:,} records/s of 1 KB, acks=all, linger 5 ms; {reps} x {duration:g} s, medians\n")
    print("| server | round trip p50 | round trip p99 | records p50 | records p99 | p99 / tansu | CPU % |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, m in medians.items():
        ratio = f"{m[3] / tansu_p99:.2f}x" if tansu_p99 else "-"
        print(f"| {name} | {m[0]:.3f} ms | {m[1]:.3f} ms | {m[2]:.2f} ms | {m[3]:.2f} ms | {ratio} | {m[4]:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
