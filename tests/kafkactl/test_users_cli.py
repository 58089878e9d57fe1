"""kafkactl over SASL (``--command-config`` and ``-X`` with ``security.protocol=SASL_*``) and ``kafkactl
users``: SCRAM credentials set, listed and deleted, then used by a produce through ``-X``.

The broker is :mod:`tests.client.test_sasl_client`'s (its fixture is imported here): PLAINTEXT,
SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and SASL_SSL listeners, PLAIN user alice. The
refusals need no broker: the settings are checked before any connection.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.client.test_sasl_client import ALICE, ALICE_SECRET, PLAIN_MODULE, SaslBroker
from tests.client.test_sasl_client import sasl_broker  # noqa: F401 (fixture)
from tests.kafkactl.conftest import Ctl, one_line_error

UNREACHABLE = "127.0.0.1:1"  # refusals must come before any connection attempt


def _file(tmp_path: Path, text: str, name: str = "client.properties") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _alice_config(tmp_path: Path) -> str:
    """A Kafka tool's properties file: the Java client's spelling of alice's PLAIN credentials."""
    return _file(tmp_path, f"""# as kafka-configs.sh --command-config takes it
security.protocol=SASL_PLAINTEXT
sasl.mechanism=PLAIN
sasl.jaas.config={PLAIN_MODULE} required \\
    username="{ALICE}" \\
    password="{ALICE_SECRET}";
""", "alice.properties")


def test_scram_users_set_list_delete_and_produce_with_one(sasl_broker: SaslBroker, tmp_path: Path) -> None:
    ctl = Ctl(sasl_broker.sasl_plaintext)
    admin = ("--command-config", _alice_config(tmp_path))
    user = f"dave-{uuid.uuid4().hex[:6]}"
    secret = _file(tmp_path, "dave's secret\n", "dave.pw")
    res = ctl(*admin, "users", "set-scram", user, "--mechanism", "SCRAM-SHA-256", "--iterations", "8192",
              "--password-file", secret)
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"set the SCRAM-SHA-256 credential of {user} (8192 iterations)\n"
    assert ctl.json(*admin, "users", "set-scram", user, "-m", "scram-sha-512", "--password-stdin",
                    input="other secret") == {"user": user, "mechanism": "SCRAM-SHA-512", "iterations": 4096}

    listed = ctl.json(*admin, "users", "list")
    assert [r for r in listed if r["user"] == user] == [
        {"user": user, "mechanism": "SCRAM-SHA-256", "iterations": 8192},
        {"user": user, "mechanism": "SCRAM-SHA-512", "iterations": 4096}]
    table = ctl(*admin, "users", "list", user)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["USER", "MECHANISM", "ITERATIONS"]
    assert [line.split() for line in lines[1:]] == [[user, "SCRAM-SHA-256", "8192"], [user, "SCRAM-SHA-512", "4096"]]

    # the new user produces through -X (librdkafka's names), and reads back with the file's spelling
    x = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", f"sasl.username={user}",
         "-X", "sasl.password=dave's secret"]
    assert ctl(*admin, "topics", "create", f"t-{user}").returncode == 0
    [rec] = ctl.lines("produce", f"t-{user}", *x, input="hello\n")
    assert rec["offset"] == 0
    scram_512 = _file(tmp_path, f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                                f"sasl.username={user}\nsasl.password=other secret\n", "dave512.properties")
    [got] = ctl.lines("--command-config", scram_512, "consume", f"t-{user}", "--from-beginning", "--max-messages",
                      "1", "--timeout", "20")
    assert got["value"] == "hello"

    res = ctl(*admin, "users", "delete-scram", user, "--mechanism", "SCRAM-SHA-256")
    assert res.returncode == 0 and res.stdout == f"deleted the SCRAM-SHA-256 credential of {user}\n", res.stderr
    assert [r["mechanism"] for r in ctl.json(*admin, "users", "list", user)] == ["SCRAM-SHA-512"]
    # the deleted credential no longer authenticates: refused, exit 1, one line
    line = one_line_error(ctl("produce", f"t-{user}", *x, input="again\n"), 1)
    assert line.startswith(f"kafkactl: cannot authenticate to the cluster at {sasl_broker.sasl_plaintext}: "
                           "SASL_AUTHENTICATION_FAILED (58)")
    assert "dave's secret" not in line
    # deleting what is not there, or listing a user without credentials: bad input
    line = one_line_error(ctl(*admin, "users", "delete-scram", user, "-m", "SCRAM-SHA-256"), 2)
    assert "RESOURCE_NOT_FOUND (91)" in line and f"user {user}" in line
    assert ctl(*admin, "users", "delete-scram", user, "-m", "SCRAM-SHA-512").returncode == 0
    assert "RESOURCE_NOT_FOUND" in one_line_error(ctl(*admin, "users", "list", user), 2)
    assert user not in {r["user"] for r in ctl.json(*admin, "users", "list")}


def test_an_empty_list_and_sasl_ssl(sasl_broker: SaslBroker, tmp_path: Path) -> None:
    """SASL_SSL from a file with the TLS settings beside the SASL ones; a user filter with no credentials
    in the table form."""
    conf = _file(tmp_path, f"security.protocol=SASL_SSL\nssl.ca.location={sasl_broker.ca}\n"
                           f"sasl.mechanism=PLAIN\nsasl.username={ALICE}\nsasl.password={ALICE_SECRET}\n")
    res = Ctl(sasl_broker.sasl_ssl)("--command-config", conf, "users", "list")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0].split() == ["USER", "MECHANISM", "ITERATIONS"]
    topics = Ctl(sasl_broker.sasl_ssl)("--command-config", conf, "topics", "list")
    assert topics.returncode == 0, topics.stderr


def test_authentication_failures_and_their_exit_codes(sasl_broker: SaslBroker, tmp_path: Path) -> None:
    ctl = Ctl(sasl_broker.sasl_plaintext)
    wrong = _file(tmp_path, f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={ALICE}\n"
                            "sasl.password=not-her-password\n")
    line = one_line_error(ctl("--command-config", wrong, "topics", "list"), 1)
    assert "SASL_AUTHENTICATION_FAILED (58)" in line and "not-her-password" not in line
    # a mechanism the listener does not enable: the setting is wrong, exit 2
    ssl = _file(tmp_path, f"security.protocol=SASL_SSL\nssl.ca.location={sasl_broker.ca}\n"
                          f"sasl.mechanism=SCRAM-SHA-256\nsasl.username={ALICE}\nsasl.password=x\n", "ssl.properties")
    line = one_line_error(Ctl(sasl_broker.sasl_ssl)("--command-config", ssl, "topics", "list"), 2)
    assert "UNSUPPORTED_SASL_MECHANISM (33)" in line and "the broker offers PLAIN, SCRAM-SHA-512" in line
    # no SASL where the listener wants it: the cluster cannot be used, exit 3
    line = one_line_error(ctl("topics", "list"), 3)
    assert "does the listener require SASL? see security.protocol" in line


# -- refusals: one line, exit 2, before connecting ----------------------------------------------------

@pytest.mark.parametrize("argv, says", [
    (["users", "set-scram", "u", "-m", "SCRAM-SHA-256", "--password", "visible"],
     "kafkactl takes no password on its command line (ps and the shell's history would show it): use "
     "--password-stdin or --password-file FILE"),
    (["users", "set-scram", "u", "-m", "SCRAM-SHA-256"], "give the password with --password-file FILE or "
                                                         "--password-stdin (one of them)"),
    (["users", "set-scram", "u", "-m", "SCRAM-SHA-256", "--iterations", "1000", "--password-stdin"],
     "Invalid value for '--iterations'"),
    (["users", "set-scram", "u", "-m", "SCRAM-SHA-1", "--password-stdin"],
     "Invalid value for '--mechanism' / '-m': must be SCRAM-SHA-256 or SCRAM-SHA-512, not 'SCRAM-SHA-1'"),
    (["users", "set-scram", "u", "-m", "SCRAM-SHA-256", "--password-file", "/nonexistent/pw"],
     "Invalid value for '--password-file'"),
    (["users", "set-scram", "u", "-m", "SCRAM-SHA-256", "--password-stdin"], "the password in standard input is empty"),
    (["users", "delete-scram", "u"], "Missing option '--mechanism'"),
])
def test_bad_users_commands(argv: list[str], says: str) -> None:
    line = one_line_error(Ctl(UNREACHABLE)(*argv, input="\n"), 2)
    assert says in line, line
    assert "visible" not in line


def test_a_password_of_two_lines_is_refused(tmp_path: Path) -> None:
    pw = _file(tmp_path, "one\ntwo\n", "pw")
    line = one_line_error(Ctl(UNREACHABLE)("users", "set-scram", "u", "-m", "SCRAM-SHA-512", "--password-file", pw), 2)
    assert line == f"kafkactl: the password in {pw} is more than one line"


@pytest.mark.parametrize("text, says", [
    ("security.protocol=SASL_SSL\n", "security.protocol=SASL_SSL needs sasl.mechanism: GSSAPI, PLAIN, "
                                     "SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.keytab=/nonexistent.keytab\n",
     "sasl.kerberos.keytab needs sasl.kerberos.principal"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.kerberos.kinit.cmd=kinit\n",
     "line 2: unknown or unsupported client setting 'sasl.kerberos.kinit.cmd' (kafkactl's SASL settings: "
     "sasl.mechanism (GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER), sasl.username, sasl.password, "
     "sasl.jaas.config, sasl.kerberos.service.name, .keytab, .principal, sasl.oauthbearer.method, .client.id, .client.secret, .token.endpoint.url, .scope, "
     ".extensions, .config, enable.sasl.oauthbearer.unsecure.jwt, sasl.login.callback.handler.class)"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\n"
     f'sasl.jaas.config={PLAIN_MODULE} required username="u" password="hidden-pw";\n',
     "give either sasl.jaas.config or sasl.username and sasl.password, not both"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
     "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n",
     "login module org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule is for "
     "sasl.mechanism=OAUTHBEARER, not PLAIN"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\n",
     "needs sasl.username and sasl.password (or sasl.jaas.config)"),
])
def test_bad_sasl_settings_are_one_line(tmp_path: Path, text: str, says: str) -> None:
    conf = _file(tmp_path, text)
    line = one_line_error(Ctl(UNREACHABLE)("--command-config", conf, "topics", "list"), 2)
    assert conf in line and says in line, line
    assert "hidden-pw" not in line


def test_a_bad_sasl_setting_in_x_is_one_line() -> None:
    res = Ctl(UNREACHABLE)("produce", "t", "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER",
                           input="x\n")
    assert one_line_error(res, 2).startswith("kafkactl: sasl.mechanism=OAUTHBEARER needs a token source: "
                                             "sasl.oauthbearer.method=oidc with ")
