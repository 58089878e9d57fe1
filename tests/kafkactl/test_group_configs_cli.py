"""``kafkactl configs get|set group G``: Kafka 4.1's group configs, against a broker process."""

from __future__ import annotations

from tests.kafkactl.conftest import Ctl, one_line_error


def test_configs_of_a_group(ctl: Ctl) -> None:
    # the group need not exist
    assert ctl.json("configs", "get", "group", "billing") == []
    assert "group billing has no config overrides" in ctl("configs", "get", "group", "billing").stdout

    res = ctl("configs", "set", "group", "billing", "share.auto.offset.reset=earliest",
              "share.partition.max.record.locks=100")
    assert res.returncode == 0, res.stderr
    assert "updated group billing: share.auto.offset.reset=earliest, share.partition.max.record.locks=100" \
        in res.stdout
    rows = {r["name"]: r for r in ctl.json("configs", "get", "group", "billing")}
    assert rows == {
        "share.auto.offset.reset": {"name": "share.auto.offset.reset", "value": "earliest", "source": "GROUP_CONFIG",
                                    "read_only": False, "is_sensitive": False, "is_default": False},
        "share.partition.max.record.locks": {"name": "share.partition.max.record.locks", "value": "100",
                                             "source": "GROUP_CONFIG", "read_only": False, "is_sensitive": False,
                                             "is_default": False}}

    everything = {r["name"]: (r["value"], r["source"]) for r in ctl.json("configs", "get", "group", "billing", "--all")}
    assert everything["share.record.lock.duration.ms"] == ("30000", "DEFAULT_CONFIG")
    assert everything["share.auto.offset.reset"] == ("earliest", "GROUP_CONFIG")
    assert len(everything) == 9
    only = ctl.json("configs", "get", "group", "billing", "--key", "share.isolation.level")
    assert [(r["name"], r["value"], r["source"]) for r in only] == [
        ("share.isolation.level", "read_uncommitted", "DEFAULT_CONFIG")]

    checked = ctl.json("configs", "set", "group", "billing", "share.isolation.level=read_committed", "--validate-only")
    assert checked == {"resource_type": "group", "name": "billing", "validate_only": True,
                       "changes": {"share.isolation.level": "read_committed"}}
    assert "share.isolation.level" not in {r["name"] for r in ctl.json("configs", "get", "group", "billing")}

    res = ctl("configs", "set", "group", "billing", "--delete", "share.auto.offset.reset")
    assert res.returncode == 0, res.stderr
    assert "updated group billing: share.auto.offset.reset deleted" in res.stdout
    assert [r["name"] for r in ctl.json("configs", "get", "group", "billing")] == ["share.partition.max.record.locks"]


def test_bad_group_configs_are_one_line_errors(ctl: Ctl) -> None:
    unknown = one_line_error(ctl("configs", "set", "group", "g", "share.lock.ms=1"), 2)
    assert "Unknown group config name: share.lock.ms" in unknown and "INVALID_CONFIG (40)" in unknown
    bound = one_line_error(ctl("configs", "set", "group", "g", "share.record.lock.duration.ms=120000"), 2)
    assert "group.share.max.record.lock.duration.ms" in bound and "INVALID_CONFIG (40)" in bound
    assert "group name is needed" in one_line_error(ctl("configs", "get", "group", ""), 2)
    assert ctl.json("configs", "get", "group", "g") == []
