"""The loader on a real standalone Spark cluster: a master and two workers started
from the pyspark package (``spark-class ...deploy.master.Master`` / ``...Worker``
on 127.0.0.1), the job submitted with ``--master spark://127.0.0.1:PORT`` so the
reads happen in executor processes of the workers, not in the driver; its output
equals the same job's in local mode."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

import pyspark

from .conftest import create, produce

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
START_LIMIT_S = 120  # a guard against a hung JVM start, not a performance assertion


class SparkDaemon:
    """One master or worker JVM (spark-class execs java: the PID is the JVM's)."""

    def __init__(self, log: Path, *args: str) -> None:
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([str(SPARK_CLASS), *args], stdout=out, stderr=subprocess.STDOUT, env=env)

    def wait_for(self, pattern: str) -> re.Match:
        deadline = time.monotonic() + START_LIMIT_S
        while time.monotonic() < deadline:
            m = re.search(pattern, self.log.read_text(errors="replace"))
            if m:
                return m
            assert self.proc.poll() is None, self.log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        raise AssertionError(f"{pattern!r} not seen in {START_LIMIT_S}s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def spark_cluster(tmp_path):
    daemons = []
    try:
        master = SparkDaemon(tmp_path / "master.log", "org.apache.spark.deploy.master.Master",
                             "--host", "127.0.0.1", "--port", "0", "--webui-port", "0")
        daemons.append(master)
        url = master.wait_for(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)").group(1)
        workers = []
        for i in range(2):
            work = tmp_path / f"worker{i}"
            work.mkdir()
            w = SparkDaemon(tmp_path / f"worker{i}.log", "org.apache.spark.deploy.worker.Worker", url,
                            "--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", "1",
                            "--memory", "1g", "--work-dir", str(work))
            daemons.append(w)
            workers.append(work)
        for w in daemons[1:]:
            w.wait_for(r"Successfully registered with master")
        yield url, workers
    finally:
        for d in reversed(daemons):
            d.stop()


def _loaded(out: Path) -> set:
    rows = ds.dataset(str(out), format="parquet", partitioning="hive").to_table().to_pylist()
    return {(r["topic"], r["partition"], r["offset"], str(r["date"]), int(r["hour"]), r["key"], r["value"])
            for r in rows}


def test_loader_on_a_standalone_cluster_equals_local_mode(kafka, topic_name, spark_cluster, tmp_path):
    url, workers = spark_cluster
    t = topic_name()
    create(kafka.bootstrap, (t, 4))
    produce(kafka.bootstrap, t, 4, 400, step_ms=20 * 60_000)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    runs = {}
    for mode, extra in (("cluster", ["--master", url]), ("local", ["--master", "local[2]"])):
        out = tmp_path / mode
        proc = subprocess.run([sys.executable, "-m", "pipeline", "load", "--bootstrap-server", kafka.bootstrap,
                               "--topics", t, "--output", str(out), *extra],
                              capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[mode] = _loaded(out)
    assert len(runs["local"]) == 400
    assert runs["cluster"] == runs["local"]
    # the reads ran in the workers' executor processes: both executors ran tasks
    executor_logs = [list(w.glob("app-*/*/stderr")) for w in workers]
    assert all(executor_logs), executor_logs
    assert all("Running task" in p.read_text(errors="replace") for logs in executor_logs for p in logs)
