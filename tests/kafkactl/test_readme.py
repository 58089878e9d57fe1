"""Every command of the README's kafkactl section runs as written: the code blocks
are read from README.md, each line is run by bash (``kafkactl`` from this
virtualenv, ``127.0.0.1:9092`` replaced by a real broker's address, paths relative
to a directory whose ``data/kafka-logs`` is that broker's log dir), and its exit
code and output are checked. The offline block runs after the broker stopped, as
the README says; ``mirror.yaml`` is the one the README's mirroring section writes,
its second cluster a second broker. A README command without a check here fails
the test: add one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

from tests.kafkactl.conftest import RUN_LIMIT_S

README = Path(__file__).resolve().parents[2] / "README.md"


def mirror_config(text: str) -> str:
    """The mirror.yaml the README's mirroring section writes."""
    return re.search(r"^cat > mirror.yaml <<'YAML'\n(.*?\n)YAML$", text, flags=re.M | re.S).group(1)


def readme_blocks() -> list[list[str]]:
    """The command lines of each code block in the README's ``## kafkactl`` section."""
    text = README.read_text()
    section = text[text.index("\n## kafkactl\n"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", section, flags=re.M | re.S)
    return [[line for line in block.splitlines() if line.strip()] for block in blocks]


def _lines(out: str) -> list[str]:
    return out.splitlines()


def _json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


# (pattern the command matches, check of (stdout, stderr)); each check asserts.
Check = Callable[[str, str], None]


def _cluster(out, err):
    assert "cluster_id: " in out and "controller_id: 0" in out


def _created(out, err):
    assert out == "created topic orders with 6 partition(s), replication factor 1\n"


def _altered(out, err):
    assert out == "altered topic orders: 12 partition(s), segment.bytes=104857600\n"


def _described(out, err):
    [topic] = json.loads(out)
    assert topic["partition_count"] == 12
    assert topic["configs"] == {"retention.ms": "86400000", "segment.bytes": "104857600"}


def _configs_set(out, err):
    assert out == "updated topic orders: retention.ms=3600000, segment.bytes deleted\n"


def _broker_configs(out, err):
    rows = _lines(out)
    assert rows[0].split() == ["NAME", "VALUE", "SOURCE", "READ_ONLY"]
    assert any(row.split()[0] == "num.partitions" for row in rows[1:])


def _produced(out, err):
    assert re.fullmatch(r"produced 2 record\(s\) to orders \(partitions? [\d,]+\)\n", err), err


def _consumed(out, err):
    fields = [line.split("\t") for line in _lines(out)]
    assert sorted(f[2:] for f in fields) == [["user1", "hello"], ["user2", "world"]]
    assert all(f[0].startswith("Partition:") and f[1].startswith("Offset:") for f in fields)
    assert err == "Processed a total of 2 messages\n"


def _group_consumed(out, err):
    assert sorted((r["key"], r["value"]) for r in _json_lines(out)) == [("user1", "hello"), ("user2", "world")]


def _groups_listed(out, err):
    rows = [line.split() for line in _lines(out)]
    assert rows[0] == ["GROUP_ID", "PROTOCOL_TYPE", "STATE", "TYPE"]
    assert ["billing", "consumer", "Empty", "classic"] in rows[1:]


def _group_described(out, err):
    assert _lines(out)[0].startswith("group billing: state Empty") and "total lag 0" in out


def _dry_run(out, err):
    assert _lines(out)[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT_OFFSET", "NEW_OFFSET"]
    assert len(_lines(out)) == 3
    assert err == "dry run: nothing changed; add --execute to apply\n"


def _executed(out, err):
    rows = [line.split() for line in _lines(out)[1:]]
    assert rows and all(row[-1] == "0" for row in rows)  # every record is from the last hour
    assert err == ""


def _perf_produced(out, err):
    assert out.startswith("100000 records sent, ")


def _perf_consumed(out, err):
    assert _lines(out)[1].split() == ["records", "100000"]


def _perf_e2e(out, err):
    assert re.fullmatch(r"1000 records end to end, [\d.]+ ms avg latency, .*; acknowledged in .* ms 99th\.\n", out)


def _mirror_status(out, err):
    rows = [line.split() for line in _lines(out)]
    assert rows[0][:3] == ["FLOW", "TOPIC", "PARTITION"]
    partitions = [r for r in rows if r[1:2] == ["orders"]]
    assert len(partitions) == 12 and all(r[5] == "-" for r in partitions)  # no mirror ran: nothing mirrored
    billing = [r for r in rows if r[1:3] == ["billing", "orders"]]
    assert billing and all(r[-1] == "-" for r in billing)  # nor translated


def _scram_set(out, err):
    assert out == "set the SCRAM-SHA-256 credential of alice (8192 iterations)\n"


def _scram_listed(out, err):
    rows = [line.split() for line in _lines(out)]
    assert rows == [["USER", "MECHANISM", "ITERATIONS"], ["alice", "SCRAM-SHA-256", "8192"]]


def _quota_set(out, err):
    assert out == "set producer_byte_rate=1048576, consumer_byte_rate=2097152 for user 'alice'\n"


def _quotas_listed(out, err):
    rows = [line.split() for line in _lines(out)]
    assert rows == [["USER", "CLIENT_ID", "IP", "QUOTAS"],
                    ["alice", "-", "-", "consumer_byte_rate=2097152,producer_byte_rate=1048576"]]


def _quota_removed(out, err):
    assert out == "removed consumer_byte_rate of user 'alice'\n"


def _version(out, err):
    assert re.fullmatch(r"kafkactl \S+\n", out)


def _completion(out, err):
    assert out == "" and err == ""


def _dumped_records(out, err):
    assert out.startswith("Dumping ") and "| offset: " in out


def _dumped_json(out, err):
    batches = _json_lines(out)
    assert batches and all(b["magic"] == 2 and b["crc_valid"] for b in batches)


def _offsets_decoded(out, err):
    assert '"group": "billing"' in out and '"type": "offset_commit"' in out


def _verified(out, err):
    assert re.search(r"^\d+ partition\(s\) checked, 0 corrupt$", out, flags=re.M)


def _recovered(out, err):
    assert re.fullmatch(r"\S+orders-0: clean, log end offset \d+\n", out)


EXPECT: list[tuple[str, Check]] = [
    (r"cluster describe", _cluster),
    (r"topics create orders", _created),
    (r"topics alter orders", _altered),
    (r"topics describe orders --configs -o json", _described),
    (r"configs set topic orders", _configs_set),
    (r"configs get broker 0 --all", _broker_configs),
    (r"\| kafkactl produce orders", _produced),
    (r"consume orders --from-beginning --max-messages 10", _consumed),
    (r"consume orders --group billing", _group_consumed),
    (r"groups list --type", _groups_listed),
    (r"groups describe billing", _group_described),
    (r"reset-offsets billing --topic orders:0,1 .*--to-datetime", _dry_run),
    (r"reset-offsets billing --all-topics .*--execute", _executed),
    (r"perf produce orders", _perf_produced),
    (r"perf consume orders", _perf_consumed),
    (r"perf e2e orders", _perf_e2e),
    (r"mirror status --config mirror.yaml", _mirror_status),
    (r"users set-scram alice", _scram_set),
    (r"users list", _scram_listed),
    (r"quotas set --user alice", _quota_set),
    (r"quotas list --user alice", _quotas_listed),
    (r"quotas remove --user alice", _quota_removed),
    (r"kafkactl --version", _version),
    (r"--show-completion bash", _completion),
    (r"log dump \S+/orders-0 --records", _dumped_records),
    (r"log dump \S+\.log -o json", _dumped_json),
    (r"log dump \S+/__consumer_offsets-\d+ --offsets-decoder", _offsets_decoded),
    (r"log verify ", _verified),
    (r"log recover \S+ --dry-run", _recovered),
    (r"log recover \S+orders-0 +(#|$)", _recovered),
]


def _check_for(command: str) -> Check:
    found = [check for pattern, check in EXPECT if re.search(pattern, command)]
    assert len(found) == 1, f"README command without exactly one check in {__file__}: {command}"
    return found[0]


def test_every_readme_command_runs_as_written(broker_factory, tmp_path: Path) -> None:
    blocks = readme_blocks()
    assert len(blocks) == 2, "expected the cluster block and the offline block"
    for block in blocks:  # a README command without a check fails before anything runs
        for command in block:
            _check_for(command)
    workdir = tmp_path / "ops"
    broker = broker_factory(log_dirs=str(workdir / "data" / "kafka-logs"))
    dc2 = broker_factory()  # the mirror's second cluster, as in the README's mirroring section
    (workdir / "mirror.yaml").write_text(mirror_config(README.read_text())
                                         .replace("127.0.0.1:9092", broker.bootstrap)
                                         .replace("127.0.0.1:9093", dc2.bootstrap))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "KAFKACTL_BOOTSTRAP": broker.bootstrap, "KAFKACTL_CONFIG": str(tmp_path / "no-config.yaml")}
    env.pop("KAFKACTL_DEBUG", None)
    cluster, offline = blocks
    for n, block in enumerate((cluster, offline)):
        if n == 1:
            assert broker.stop() == 0
        for command in block:
            text = command.replace("127.0.0.1:9092", broker.bootstrap)
            res = subprocess.run(["bash", "-o", "pipefail", "-c", text], cwd=workdir, env=env, capture_output=True,
                                 text=True, timeout=RUN_LIMIT_S * 2)
            assert res.returncode == 0, (command, res.stderr)
            _check_for(command)(res.stdout, res.stderr)
