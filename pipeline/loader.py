"""The loader job: everything new in a set of topics into Hive-style directories, exactly once.

Each run reads, for every partition of the matching topics, from where the last
successful run stopped up to the log end offset (at most
``--max-records-per-partition``), and writes the records with the schema of
the ``kafkapy`` source, partitioned by record timestamp in UTC::

    URI/topic=T/date=YYYY-MM-DD/hour=HH/part-....parquet

The offsets live with the data, as Kafka's Hadoop loader kept them in HDFS::

    URI/_kafkapy/manifests/NNNNNNNNNN.json   run N: {"run", "offsets": {topic: {partition: next}}, "files"}
    URI/_kafkapy/staging/run-NNNNNNNNNN/     run N's files while it writes them

A run (1) rolls the last manifest forward (moves any of its files still in
staging) and deletes staging directories of runs without a manifest, (2) writes
its files into its staging directory (Spark ignores ``_``-prefixed directories,
so readers of ``URI`` never see them), (3) writes manifest N atomically (a
temporary file renamed into place): this is the commit point, (4) moves the
files into place and (5) commits the offsets to ``--group`` for monitoring. A
run killed before (3) leaves nothing counted: the next run deletes its staging
files and reads the same offsets again; killed after (3), the next run finishes
its moves. A reader of ``URI`` never sees a record twice.

With ``delegation_token`` (``--delegation-token``) the Spark tasks do not get the
driver's credentials: the driver, authenticated as the command config says (a
Kerberos keytab, SCRAM, a client certificate ...), creates a delegation token
(KIP-48) and the tasks authenticate with it over SCRAM (``token_mechanism``,
SCRAM-SHA-512 as Spark's own Kafka source defaults to), as the same principal;
the driver expires the token when the run ends, loaded or failed. This is how
Spark's Kafka source serves Kerberized clusters: no keytab on any executor. The
listener needs SCRAM enabled and the brokers ``delegation.token.master.key``.

Files are reached through Hadoop's FileSystem API in Spark's JVM, so ``URI``
may be any file system Spark has (``file://``, ``hdfs://``, ``s3a://``); the
manifest's rename is atomic where the file system's rename is (HDFS, local).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field

from broker.client import Admin, TopicPartition

from . import options as opt

MANIFESTS = "_kafkapy/manifests"
STAGING = "_kafkapy/staging"


@dataclass
class LoadResult:
    run: int
    records: dict[str, int] = field(default_factory=dict)  # per topic
    bytes: dict[str, int] = field(default_factory=dict)  # key + value bytes per topic
    files: int = 0
    seconds: float = 0.0
    offsets: dict[str, dict[str, int]] = field(default_factory=dict)


class Output:
    """The output directory through Hadoop's FileSystem (any URI Spark can write)."""

    def __init__(self, spark, uri: str) -> None:
        self.jvm = spark._jvm
        self.uri = uri.rstrip("/")
        self.fs = self.jvm.org.apache.hadoop.fs.Path(self.uri).getFileSystem(spark._jsc.hadoopConfiguration())

    def path(self, rel: str):
        return self.jvm.org.apache.hadoop.fs.Path(f"{self.uri}/{rel}")

    def exists(self, rel: str) -> bool:
        return self.fs.exists(self.path(rel))

    def list(self, rel: str) -> list[str]:
        if not self.exists(rel):
            return []
        return sorted(s.getPath().getName() for s in self.fs.listStatus(self.path(rel)))

    def files_under(self, rel: str) -> list[str]:
        """Data files below ``rel`` (relative to it), skipping Spark's ``_SUCCESS`` and ``.crc`` files."""
        out = []
        it = self.fs.listFiles(self.path(rel), True)
        base = self.path(rel).toUri().getPath().rstrip("/") + "/"
        while it.hasNext():
            p = it.next().getPath()
            name = p.getName()
            if name.startswith(("_", ".")):
                continue
            out.append(p.toUri().getPath()[len(base):])
        return sorted(out)

    def read_text(self, rel: str) -> str:
        stream = self.fs.open(self.path(rel))
        try:
            reader = self.jvm.java.io.BufferedReader(self.jvm.java.io.InputStreamReader(stream, "UTF-8"))
            lines = []
            line = reader.readLine()
            while line is not None:
                lines.append(line)
                line = reader.readLine()
            return "\n".join(lines)
        finally:
            stream.close()

    def write_atomically(self, rel: str, text: str) -> None:
        tmp = self.path(rel + ".tmp")
        stream = self.fs.create(tmp, True)
        try:
            stream.write(bytearray(text.encode()))
            stream.hsync()
        finally:
            stream.close()
        if not self.fs.rename(tmp, self.path(rel)):
            raise OSError(f"could not rename {rel}.tmp to {rel}")

    def move(self, src: str, dst: str) -> None:
        self.fs.mkdirs(self.path(dst).getParent())
        if not self.fs.rename(self.path(src), self.path(dst)):
            raise OSError(f"could not move {src} to {dst}")

    def delete(self, rel: str) -> None:
        self.fs.delete(self.path(rel), True)


def last_manifest(out: Output) -> dict | None:
    names = [n for n in out.list(MANIFESTS) if n.endswith(".json")]
    return json.loads(out.read_text(f"{MANIFESTS}/{names[-1]}")) if names else None


def recover(out: Output, manifest: dict | None) -> None:
    """Finish the last committed run's moves; drop staging files of runs that never committed."""
    committed = manifest["run"] if manifest else 0
    if manifest:
        staging = f"{STAGING}/run-{committed:010d}"
        for rel in manifest["files"]:
            if out.exists(f"{staging}/{rel}") and not out.exists(rel):
                out.move(f"{staging}/{rel}", rel)
    for name in out.list(STAGING):
        out.delete(f"{STAGING}/{name}")
    for name in out.list(MANIFESTS):
        if name.endswith(".tmp"):
            out.delete(f"{MANIFESTS}/{name}")


def plan_offsets(admin: Admin, topics_regex: str, previous: dict, max_records: int | None
                 ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Start and end offsets of this run: from the manifest (earliest for new partitions) to the end."""
    tps = opt.topic_partitions({"subscribePattern": topics_regex}, admin)
    earliest = {tp: o for tp, (o, _) in admin.list_offsets(dict.fromkeys(tps, opt.EARLIEST)).items()}
    latest = {tp: o for tp, (o, _) in admin.list_offsets(dict.fromkeys(tps, opt.LATEST)).items()}
    start, end = {}, {}
    for tp in tps:
        s = previous.get(tp.topic, {}).get(str(tp.partition), earliest[tp])
        if s < earliest[tp]:
            raise opt.OptionError(f"{tp.topic}-{tp.partition}: offsets {s} to {earliest[tp] - 1} were deleted "
                                  f"before they were loaded (log start offset {earliest[tp]})")
        e = latest[tp] if max_records is None else min(latest[tp], s + max_records)
        start[tp], end[tp] = s, max(s, e)
    return start, end


def check_token_protocol(conf: dict) -> None:
    """A delegation token is made and used over SASL: OptionError for any other ``security.protocol``."""
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        raise opt.OptionError(f"a delegation token authenticates over SASL: security.protocol is {protocol}, "
                              "not SASL_PLAINTEXT or SASL_SSL")


def token_config(conf: dict, token, mechanism: str) -> dict:
    """The client settings of the Spark tasks when they authenticate with delegation ``token``
    (:class:`broker.client.DelegationToken`): the driver's, less every SASL credential, with SCRAM and the
    token instead; TLS and every other setting kept."""
    check_token_protocol(conf)
    kept = {k: v for k, v in conf.items() if not str(k).startswith("sasl.")}
    return {**kept, "sasl.mechanism": mechanism, "sasl.jaas.config": token.jaas_config()}


def load(spark, bootstrap: str, topics: str, output: str, fmt: str = "parquet", group: str | None = None,
         max_records: int | None = None, client_props: dict | None = None, progress=print,
         delegation_token: bool = False, token_mechanism: str = "SCRAM-SHA-512") -> LoadResult:
    """One run of the loader (see the module docstring); returns what it loaded."""
    conf = {"bootstrap.servers": bootstrap, **(client_props or {})}
    if not delegation_token:
        return _load(spark, conf, topics, output, fmt, group, max_records, conf, progress)
    check_token_protocol(conf)  # before a token is made
    with Admin(conf) as admin:
        token = admin.create_delegation_token()
    progress(f"delegation token {token.token_id} for the tasks, as {token.owner}")
    try:
        return _load(spark, conf, topics, output, fmt, group, max_records, token_config(conf, token, token_mechanism),
                     progress)
    finally:
        try:
            with Admin(conf) as admin:
                admin.expire_delegation_token(token.hmac)
        except Exception as exc:  # noqa: BLE001 - the run's own outcome stands; the token lapses at its expiry
            progress(f"delegation token {token.token_id} not expired ({exc}); it lapses at its expiry")


def _load(spark, conf: dict, topics: str, output: str, fmt: str, group: str | None, max_records: int | None,
          task_conf: dict, progress) -> LoadResult:
    from pyspark.sql import functions as F
    from . import register

    t0 = time.monotonic()
    register(spark)
    out = Output(spark, output)
    manifest = last_manifest(out)
    recover(out, manifest)
    run = (manifest["run"] if manifest else 0) + 1
    previous = manifest["offsets"] if manifest else {}
    with Admin(conf) as admin:
        start, end = plan_offsets(admin, topics, previous, max_records)
    offsets = {t: dict(ps) for t, ps in previous.items()}
    for tp, e in end.items():
        offsets.setdefault(tp.topic, {})[str(tp.partition)] = e
    result = LoadResult(run=run, offsets=offsets)
    todo = {tp for tp in start if end[tp] > start[tp]}
    staging = f"{STAGING}/run-{run:010d}"
    files: list[str] = []
    if todo:
        source_options = {f"kafka.{k}": str(v) for k, v in task_conf.items()}
        source_options.update({
            "assign": json.dumps(_by_topic({tp: tp.partition for tp in todo}, as_list=True)),
            "startingOffsets": json.dumps(_by_topic({tp: start[tp] for tp in todo})),
            "endingOffsets": json.dumps(_by_topic({tp: end[tp] for tp in todo})),
            "includeHeaders": "true"})
        df = spark.read.format("kafkapy").options(**source_options).load()
        # date_format renders in the session's time zone: shift so it renders UTC in any session
        utc = F.to_utc_timestamp(F.col("timestamp"), spark.conf.get("spark.sql.session.timeZone"))
        df = df.withColumn("date", F.date_format(utc, "yyyy-MM-dd")).withColumn("hour", F.date_format(utc, "HH"))
        progress(f"run {run}: reading {sum(end[tp] - start[tp] for tp in todo)} offsets "
                 f"from {len(todo)} partitions into {output} ({fmt})")
        df.write.mode("overwrite").partitionBy("topic", "date", "hour").format(fmt).save(out.path(staging).toString())
        files = out.files_under(staging)
        # counted from the staged files, not by reading Kafka twice (JSON holds binary as base64)
        size = (F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
                if fmt != "json" else F.lit(0))
        stats = (spark.read.format(fmt).load(out.path(staging).toString()).groupBy("topic")
                 .agg(F.count("*").alias("n"), F.sum(size).alias("b")).collect())
        for row in stats:
            result.records[row["topic"]], result.bytes[row["topic"]] = row["n"], int(row["b"] or 0)
    manifest = {"run": run, "offsets": offsets, "files": files, "written_at_ms": int(time.time() * 1000)}
    out.write_atomically(f"{MANIFESTS}/{run:010d}.json", json.dumps(manifest, indent=1, sort_keys=True))
    recover(out, manifest)
    if group:
        with Admin(conf) as admin:
            admin.alter_group_offsets(group, {TopicPartition(t, int(p)): o
                                              for t, ps in offsets.items() for p, o in ps.items()})
    result.files, result.seconds = len(files), time.monotonic() - t0
    return result


def _by_topic(values: dict[TopicPartition, int], as_list: bool = False) -> dict:
    out: dict = {}
    for tp, v in sorted(values.items()):
        if as_list:
            out.setdefault(tp.topic, []).append(v)
        else:
            out.setdefault(tp.topic, {})[str(tp.partition)] = v
    return out


def summary(result: LoadResult) -> str:
    lines = [f"run {result.run}: {result.files} files in {result.seconds:.1f}s"]
    for topic in sorted(result.records):
        n, b = result.records[topic], result.bytes.get(topic, 0)
        rate = n / result.seconds if result.seconds else 0
        lines.append(f"  {topic}: {n} records, {b} bytes ({rate:,.0f} records/s)")
    if not result.records:
        lines.append("  nothing new")
    return "\n".join(lines)


def session(master: str | None, app_name: str = "kafkapy-loader"):
    """A SparkSession: ``master`` if given, else spark-submit's, else ``local[*]``.

    Python workers run this interpreter unless PYSPARK_PYTHON or
    ``spark.pyspark.python`` says otherwise (they import our client).
    """
    import os
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = SparkConf()
    builder = SparkSession.builder.appName(app_name).config("spark.sql.session.timeZone", "UTC")
    if master:
        builder = builder.master(master)
    elif not conf.contains("spark.master"):
        builder = builder.master("local[*]")
    if not conf.contains("spark.ui.enabled"):
        builder = builder.config("spark.ui.enabled", "false")
    if "PYSPARK_PYTHON" not in os.environ and not conf.contains("spark.pyspark.python"):
        builder = builder.config("spark.pyspark.python", sys.executable)
    return builder.getOrCreate()
