"""``kafkactl log-dirs describe|move`` end to end against a broker with two log dirs, and their error paths."""

from __future__ import annotations

import os
import time

from tests.kafkactl.conftest import Ctl, one_line_error

WAIT_S = 30  # a guard against a move that never finishes, not a timing


def test_log_dirs_describe_and_move(broker_factory, tmp_path) -> None:
    dirs = [os.path.abspath(tmp_path / "a"), os.path.abspath(tmp_path / "b")]
    b = broker_factory(log_dirs=",".join(dirs))
    ctl = Ctl(b.bootstrap)
    assert ctl("topics", "create", "dirs", "--partitions", "2").returncode == 0
    assert ctl("produce", "dirs", "--partition", "0", input="one\ntwo\nthree\n").returncode == 0

    rows = ctl.json("log-dirs", "describe")
    where = {(r["topic"], r["partition"]): r["log_dir"] for r in rows if r["topic"] == "dirs"}
    assert where == {("dirs", 0): dirs[0], ("dirs", 1): dirs[1]}
    assert all(r["broker"] == 0 and r["error"] is None and r["future"] is False for r in rows if r["topic"])
    assert next(r for r in rows if r["topic"] == "dirs" and r["partition"] == 0)["size"] > 0
    table = ctl("log-dirs", "describe", "--broker", "0")
    assert table.returncode == 0 and "LOG_DIR" in table.stdout and dirs[1] in table.stdout

    res = ctl("log-dirs", "move", "dirs", "0", dirs[1])
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"moving dirs-0 on broker 0 to {dirs[1]}"
    deadline = time.monotonic() + WAIT_S
    while True:
        rows = ctl.json("log-dirs", "describe")
        placed = [(r["log_dir"], r["future"]) for r in rows if (r["topic"], r["partition"]) == ("dirs", 0)]
        if placed == [(dirs[1], False)]:
            break
        assert time.monotonic() < deadline, placed
        time.sleep(0.2)
    consumed = ctl("consume", "dirs", "--partition", "0", "--from-beginning", "--max-messages", "3")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two", "three"]
    # already there: nothing to do, still a success
    assert ctl("log-dirs", "move", "dirs", "0", dirs[1], "--broker", "0").returncode == 0


def test_log_dirs_errors(broker_factory, tmp_path) -> None:
    dirs = [os.path.abspath(tmp_path / "a"), os.path.abspath(tmp_path / "b")]
    b = broker_factory(log_dirs=",".join(dirs))
    ctl = Ctl(b.bootstrap)
    assert ctl("topics", "create", "errs", "--partitions", "1").returncode == 0
    assert "unknown topic: nope" in one_line_error(ctl("log-dirs", "move", "nope", "0", dirs[1]), 2)
    assert "unknown partition errs-5" in one_line_error(ctl("log-dirs", "move", "errs", "5", dirs[1]), 2)
    assert "LOG_DIR_NOT_FOUND" in one_line_error(ctl("log-dirs", "move", "errs", "0", str(tmp_path / "c")), 2)
    assert "unknown broker id 9" in one_line_error(ctl("log-dirs", "describe", "--broker", "9"), 2)
    assert "unknown broker id 9" in one_line_error(ctl("log-dirs", "move", "errs", "0", dirs[1], "--broker", "9"), 2)
    one_line_error(ctl("log-dirs", "move", "errs", "zero", dirs[1]), 2)
