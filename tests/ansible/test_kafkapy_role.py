"""The ``kafkapy`` role on this machine (``connection: local``): a kafkapy upgrade is heard by the
roles of every play of the run, not only by those of the play that installed it.

A host in several groups (a ZooKeeper member that is also a broker) runs the role in each of its
plays, and only the first one's pip install changes anything. Here two plays run the role into a
virtualenv in the test's directory, from a wheelhouse holding a tiny wheel made by the test, and
the second play's handler listening for ``Kafkapy upgraded`` (as the broker role's restart flag
does) must run. (That a run without an upgrade changes nothing, the deployment test's second
``site.yml`` run checks.)
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from tests.ansible import playbooks


def make_wheel(wheelhouse: Path, name: str, version: str) -> None:
    """A pure-Python wheel with one empty module: pip installs it without an index."""
    wheelhouse.mkdir(exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": "",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(wheelhouse / f"{name}-{version}-py3-none-any.whl", "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)


def test_an_upgrade_in_the_first_play_reaches_the_handlers_of_the_second(tmp_path):
    make_wheel(tmp_path / "wheelhouse", "kafkapy_role_probe", "1.0")
    heard = tmp_path / "heard"
    role_vars = {"kafkapy_venv": str(tmp_path / "kafkapy" / "venv"), "kafkapy_package": "kafkapy_role_probe",
                 "kafkapy_wheelhouse": str(tmp_path / "wheelhouse"),
                 "kafkapy_wheelhouse_dest": str(tmp_path / "kafkapy" / "wheelhouse")}
    play = {"hosts": "localhost", "connection": "local", "gather_facts": False, "vars": role_vars,
            "roles": ["kafkapy"]}
    listener = {"name": "Note the upgrade", "ansible.builtin.copy": {"dest": str(heard), "content": "yes\n",
                                                                     "mode": "0644"},
                "listen": "Kafkapy upgraded"}
    book = tmp_path / "two-plays.yml"
    book.write_text(json.dumps([{**play, "name": "first"}, {**play, "name": "second", "handlers": [listener]}]))

    first = playbooks.run(book, "-e", "ansible_python_interpreter=/usr/bin/python3")
    assert first.returncode == 0, first.output[-3000:]
    assert heard.read_text() == "yes\n", first.output[-3000:]
    assert (tmp_path / "kafkapy" / "venv" / "lib").is_dir()
