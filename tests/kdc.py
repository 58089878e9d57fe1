"""A real MIT Kerberos KDC for the GSSAPI tests (Debian's ``krb5-kdc``), in a directory of its own.

:class:`Kdc` makes a realm (``KAFKA.TEST`` unless told otherwise) with ``kdb5_util create``, starts
``krb5kdc -n`` on a free loopback port (TCP and UDP) and writes a ``krb5.conf`` that points only at it:
no DNS lookups, host names taken as given (``dns_canonicalize_hostname = false``, ``rdns = false``),
``localhost`` and ``127.0.0.1`` in the realm. Processes that should use the realm get :attr:`env`
(``KRB5_CONFIG``; :meth:`client_env` adds a ticket cache of their own); :meth:`use_here` points the test
process itself at it (kafka-python and aiokafka authenticate in the test process).

:meth:`add_principal` creates a principal with a random key and, with ``keytab=``, exports it there
(``kadmin.local ktadd``); :meth:`kinit` fills a ticket cache from a keytab. The KDC is stopped by PID.
Nothing outside its directory is read or written.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.zookeeper import free_port

REALM = "KAFKA.TEST"
SBIN = Path("/usr/sbin")
START_LIMIT_S = 30  # a guard against a hung start, not a performance assertion


def available() -> str | None:
    """None when the KDC's programs are installed, else what is missing (``./dev`` installs them)."""
    missing = [p for p in ("krb5kdc", "kdb5_util", "kadmin.local") if not (SBIN / p).exists()]
    missing += [p for p in ("kinit",) if shutil.which(p) is None]
    return None if not missing else f"{', '.join(missing)} not installed (Debian's krb5-kdc, krb5-admin-server and krb5-user)"


class Kdc:
    """One realm and its KDC process (see the module docstring)."""

    def __init__(self, workdir: Path, realm: str = REALM) -> None:
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.realm = realm
        self.port = free_port()
        self.krb5_conf = self.dir / "krb5.conf"
        self.kdc_conf = self.dir / "kdc.conf"
        self.proc: subprocess.Popen | None = None
        self._saved_env: dict[str, str | None] | None = None

    @property
    def env(self) -> dict[str, str]:
        """The environment of a process that uses this realm (the current one, with its config)."""
        env = dict(os.environ)
        env["KRB5_CONFIG"] = str(self.krb5_conf)
        env["KRB5_KDC_PROFILE"] = str(self.kdc_conf)
        env.pop("KRB5CCNAME", None)
        env.pop("KRB5_KTNAME", None)
        return env

    def client_env(self, ccache: Path) -> dict[str, str]:
        return {**self.env, "KRB5CCNAME": f"FILE:{ccache}"}

    def start(self) -> "Kdc":
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {self.realm}\n"
            "  dns_lookup_kdc = false\n  dns_lookup_realm = false\n"
            "  dns_canonicalize_hostname = false\n  rdns = false\n"
            "  udp_preference_limit = 1\n"  # TCP always, as a KDC behind a firewall is reached
            f"  default_ccache_name = FILE:{self.dir / 'default.ccache'}\n"
            "[realms]\n"
            f"  {self.realm} = {{\n    kdc = 127.0.0.1:{self.port}\n  }}\n"
            "[domain_realm]\n"
            f"  localhost = {self.realm}\n  127.0.0.1 = {self.realm}\n")
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"  kdc_ports = {self.port}\n  kdc_tcp_listen = {self.port}\n"
            "[realms]\n"
            f"  {self.realm} = {{\n"
            f"    database_name = {self.dir / 'principal'}\n"
            f"    key_stash_file = {self.dir / 'stash'}\n"
            f"    acl_file = {self.dir / 'kadm5.acl'}\n"
            f"    kdc_listen = {self.port}\n    kdc_tcp_listen = {self.port}\n"
            "    max_life = 10h 0m 0s\n    max_renewable_life = 7d 0h 0m 0s\n"
            "    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            "  }\n"
            "[logging]\n"
            f"  kdc = FILE:{self.dir / 'kdc.log'}\n")
        (self.dir / "kadm5.acl").write_text("")
        self._run([str(SBIN / "kdb5_util"), "create", "-s", "-r", self.realm, "-P", "master-key-of-the-test-realm"])
        log = open(self.dir / "krb5kdc.stderr", "ab")
        self.proc = subprocess.Popen([str(SBIN / "krb5kdc"), "-n", "-r", self.realm], env=self.env,
                                     stdout=log, stderr=log, cwd=self.dir)
        log.close()
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"krb5kdc exited with {self.proc.returncode}: {self._log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"krb5kdc did not listen on {self.port}: {self._log_tail()}") from None
                time.sleep(0.05)

    def _log_tail(self) -> str:
        text = ""
        for name in ("krb5kdc.stderr", "kdc.log"):
            path = self.dir / name
            if path.exists():
                text += path.read_text(errors="replace")[-2000:]
        return text

    def _run(self, argv: list[str], env: dict | None = None) -> str:
        done = subprocess.run(argv, env=env or self.env, capture_output=True, text=True, timeout=60, cwd=self.dir)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def kadmin(self, query: str) -> str:
        return self._run([str(SBIN / "kadmin.local"), "-r", self.realm, "-q", query])

    def add_principal(self, name: str, keytab: Path | None = None) -> str:
        """Create ``name`` (``alice``, ``kafka/localhost``; the realm is added) with a random key; with
        ``keytab``, export its key there. Returns the full principal name."""
        principal = name if "@" in name else f"{name}@{self.realm}"
        self.kadmin(f"addprinc -randkey {principal}")
        if keytab is not None:
            self.kadmin(f"ktadd -k {keytab} {principal}")
        return principal

    def keytab_for(self, name: str, keytab: Path) -> None:
        """Export ``name``'s key into ``keytab`` once more; this makes a new key (a new kvno), which
        invalidates every keytab exported before, as ``ktadd`` does."""
        principal = name if "@" in name else f"{name}@{self.realm}"
        self.kadmin(f"ktadd -k {keytab} {principal}")

    def kinit(self, principal: str, keytab: Path, ccache: Path) -> None:
        """Get ``principal``'s ticket-granting ticket from ``keytab`` into the ticket cache ``ccache``."""
        self._run(["kinit", "-k", "-t", str(keytab), "-c", f"FILE:{ccache}", principal])

    def use_here(self) -> None:
        """Point this process's Kerberos library at the realm (undone by :meth:`stop`)."""
        if self._saved_env is None:
            self._saved_env = {k: os.environ.get(k) for k in ("KRB5_CONFIG", "KRB5_KDC_PROFILE", "KRB5CCNAME")}
        os.environ["KRB5_CONFIG"] = str(self.krb5_conf)
        os.environ["KRB5_KDC_PROFILE"] = str(self.kdc_conf)

    def set_ccache_here(self, ccache: Path) -> None:
        os.environ["KRB5CCNAME"] = f"FILE:{ccache}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._saved_env is not None:
            for key, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self._saved_env = None
