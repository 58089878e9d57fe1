"""``kafkactl mirror status --config FILE``: where each flow of a mirror config stands.

Reads the clusters named in the mirror's config (the global
``--bootstrap-server`` does not apply). One row per flow, source topic and
partition: ``source_end_offset`` (the source's high watermark),
``mirrored_offset`` (the next source offset to copy, as the flow's processes
last committed it in the group ``kafkapy-mirror.SOURCE.TARGET``; ``-`` before
the first commit) and ``lag``. One row per flow, selected group and partition:
the group's committed offset in the source and its translated offset in the
target (``-`` while not translated yet). A bad config is bad input (exit 2);
an unreachable cluster exits 3.
"""

from __future__ import annotations

from pathlib import Path

import typer

from broker.client import Admin, TopicPartition
from kafkactl._common import cluster_errors, output_format, tp_key
from kafkactl.errors import CliError
from kafkactl.output import OutputFormat, emit
from mirror.config import MirrorConfigError, load
from mirror.groups import MIRROR_GROUP_PREFIX

app = typer.Typer(help="The mirror-maker's progress and translated group offsets.", no_args_is_help=True)

PARTITION_COLUMNS = ["flow", "topic", "partition", "target_topic", "source_end_offset", "mirrored_offset", "lag"]
GROUP_COLUMNS = ["flow", "group", "topic", "partition", "source_offset", "target_topic", "target_offset"]


def _flow_status(config, flow, admins: dict[str, Admin]) -> tuple[list[dict], list[dict]]:
    src, dst = admins[flow.source], admins[flow.target]
    back = config.renamed_back(flow)
    topics = [t for t in src.list_topics() if flow.selects(t, back)]
    tps = []
    if topics:
        for name, meta in src.describe_topics(topics).items():
            tps.extend(TopicPartition(name, p) for p in meta.partitions)
    tps.sort(key=tp_key)
    ends = {tp: off for tp, (off, _) in src.list_offsets({tp: -1 for tp in tps}).items()} if tps else {}
    progress = src.list_group_offsets(flow.group_id)
    parts = []
    for tp in tps:
        mirrored = progress[tp].offset if tp in progress else None
        parts.append({"flow": flow.name, "topic": tp.topic, "partition": tp.partition,
                      "target_topic": flow.target_topic(tp.topic), "source_end_offset": ends.get(tp),
                      "mirrored_offset": mirrored,
                      "lag": None if mirrored is None else max(ends.get(tp, 0) - mirrored, 0)})
    groups = []
    selected = set(topics)
    for g in src.list_groups():
        gid = g.group_id
        if not flow.groups.fullmatch(gid) or gid.startswith(MIRROR_GROUP_PREFIX):
            continue
        committed = {tp: om for tp, om in src.list_group_offsets(gid).items() if tp.topic in selected}
        if not committed:
            continue
        translated = dst.list_group_offsets(gid)
        for tp in sorted(committed, key=tp_key):
            ttp = TopicPartition(flow.target_topic(tp.topic), tp.partition)
            groups.append({"flow": flow.name, "group": gid, "topic": tp.topic, "partition": tp.partition,
                           "source_offset": committed[tp].offset, "target_topic": ttp.topic,
                           "target_offset": translated[ttp].offset if ttp in translated else None})
    return parts, groups


@app.command("status")
def status(ctx: typer.Context,
           config: Path = typer.Option(..., "--config", metavar="FILE", help="The mirror's YAML config.")) -> None:
    """Per flow and topic: source end offset, mirrored position and lag; per group the translated offsets."""
    try:
        cfg = load(config)
    except MirrorConfigError as exc:
        raise CliError(str(exc)) from None
    parts, groups = [], []
    with cluster_errors(ctx):
        admins: dict[str, Admin] = {}
        try:
            for flow in cfg.flows:
                for name in (flow.source, flow.target):
                    if name not in admins:
                        admins[name] = Admin(cfg.clusters[name].client_properties("admin"))
                p, g = _flow_status(cfg, flow, admins)
                parts += p
                groups += g
        finally:
            for admin in admins.values():
                admin.close()
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit({"partitions": parts, "groups": groups}, fmt)
        return
    if parts:
        emit(parts, fmt, PARTITION_COLUMNS)
    else:
        print("no topics selected")
    if groups:
        print()
        emit(groups, fmt, GROUP_COLUMNS)
