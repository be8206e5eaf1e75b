"""A real etcd cluster on this machine: ``racksmith up --store etcd
--etcd-members N``, the benchmarks and the tests.

Owns the etcd processes it starts (Debian's ``etcd-server``, ``/usr/bin/etcd``
3.4) and everything under ``BASE/etcd/``; knows nothing of what is stored in
etcd (that is :mod:`racksmith.apiserver.store.etcd`). Callers:
:mod:`racksmith.app.replicas`, ``bench/apiserver.py`` and
``tests/harness/etcd.py``.

Layout (every directory 0700, every file 0600, :mod:`racksmith.filemodes`;
the members run with umask 077, so what etcd writes is private too)::

    BASE/etcd/
      cluster.json        ports, member names, cluster token, host, TLS on/off
      pki/ca.crt, ca.key  the cluster's own CA (EC P-256, ten years)
      pki/member-N.crt/.key   member N's serving *and* peer certificate
                          (SANs: the host IP, 127.0.0.1, DNS localhost;
                          EKU server and client auth, one year)
      pki/client.crt/.key the clients' certificate (EKU client auth, one year)
      member-N/           member N's data dir (WAL, snapshots, bbolt db)
      member-N.log        its stdout and stderr (appended across restarts)
      member-N.pid        its pid while running (removed when it stops)

``cluster.json`` is written before the first member starts and read by every
later :class:`LocalEtcdCluster` on the same base dir: a restart (``racksmith
up`` again, a test) reuses the ports, names and data dirs, so the members'
recorded peer URLs stay true. Ports not recorded are picked by binding port 0;
if one was taken in between and this is the cluster's first start, the
members' empty data dirs are dropped and new ports picked, once. Members still
running from an earlier process (their pid file names a live etcd on their
data dir) are adopted, not started twice, and stopped by pid like the others.
A leaf certificate that is missing, does not chain to the CA or expires within
30 days is reissued on start; the CA is made once.

Flags, and why:

* ``--listen-*-urls`` on the host address only (loopback by default): nothing
  else on the network reaches these members.
* TLS everywhere (unless ``tls=False``, for tests of the plain transport):
  ``--client-cert-auth`` + ``--trusted-ca-file`` (no certificate signed by
  this CA, no connection: the data is every Secret of the site) and the same
  between members (``--peer-client-cert-auth``). One certificate per member
  serves both roles: etcd checks a peer's client certificate SANs against the
  address it connects from, which is the host IP.
* ``--initial-cluster-state new`` always, with a random
  ``--initial-cluster-token`` recorded in cluster.json: a member with a data
  dir ignores the initial-cluster flags, and a member that never ran joins the
  cluster it was planned with (member IDs derive from the token and peer URLs,
  so a stray process of another local cluster can never join this one).
* ``--heartbeat-interval 100 --election-timeout 1000`` (etcd's defaults, said
  out loud: a loaded laptop still holds its leader) and ``--pre-vote``: a
  member coming back after a kill does not force an election on a healthy
  leader (off by default in 3.4).
* no ``--auto-compaction-*``: the store compacts itself, at revisions it
  chooses, so watches it still serves are not cut short.
* ``--max-request-bytes`` 8 MiB: above the largest object the API server
  accepts (etcd's default 1.5 MiB is below it).
* ``--quota-backend-bytes`` 2 GiB (the default) and ``--snapshot-count
  10000`` (instead of 100000: less memory and faster catch-up of a returning
  member on a laptop).
* ``--logger zap --log-outputs stderr``, stderr (and stdout) appended to
  ``member-N.log``, which we open (0600) so its mode and place do not depend
  on etcd; the members never inherit the parent's stdout, and run in sessions of
  their own (``start_new_session``) so a Ctrl-C of the terminal reaches
  ``racksmith up`` only, which stops them in order.

Health is etcd's ``GET /health`` on each client URL, over TLS with the client
certificate: ``{"health":"true"}`` once the member has a leader and a
quorum read (a linearizable range) succeeds through it; ``503`` with
``{"health":"false"}`` when it has no leader, and no answer until the read
times out while an election is under way.
Member names come from the JSON gateway, ``POST /v3/cluster/member/list``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import ipaddress
import itertools
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from racksmith import filemodes
from racksmith.controlplane import pki as certs

__all__ = ["EtcdClusterError", "EtcdTls", "LocalEtcdCluster"]

ETCD = "etcd"
"""The etcd server binary (looked up on PATH: Debian's is /usr/bin/etcd)."""
ETCD_DIR = "etcd"
STATE_FILE = "cluster.json"
STATE_VERSION = 1

HEARTBEAT_MS = 100
ELECTION_MS = 1000
QUOTA_BACKEND_BYTES = 2 * 1024**3
SNAPSHOT_COUNT = 10_000
MAX_REQUEST_BYTES = 8 * 1024 * 1024
"""Above the largest object the API accepts (a 3 MiB body, plus what the
server adds): etcd's default of 1.5 MiB would refuse some."""

RENEW_BEFORE = dt.timedelta(days=30)

REQUEST_TIMEOUT = 1.0
"""Seconds a status or member-list request may take (answered locally)."""
HEALTH_TIMEOUT = 5.0
"""Seconds a /health request may take: it waits for a quorum read, which
waits out an election (over a second after the leader was killed)."""
POLL_INTERVAL = 0.05
_START_MARK = "--- racksmith: "
"""Starts the line written to a member's log before each start."""


class EtcdClusterError(RuntimeError):
    """A member did not start or become healthy, or the state on disk does not
    match what was asked for. The message names the member and its log."""


class _PortInUse(EtcdClusterError):
    """A member exited because one of its ports was taken."""


@dataclass(frozen=True)
class EtcdTls:
    """A client's credentials for the cluster: its CA, and a client
    certificate (ExtendedKeyUsage CLIENT_AUTH) signed by that CA."""

    ca_file: Path
    cert_file: Path
    key_file: Path

    def ssl_context(self) -> ssl.SSLContext:
        """A client-side TLS context trusting the cluster's CA and presenting
        the client certificate."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


@dataclass(frozen=True)
class _Member:
    index: int
    name: str
    client_port: int
    peer_port: int


@dataclass(frozen=True)
class _State:
    """What cluster.json records."""

    token: str
    host: str
    tls: bool
    members: tuple[_Member, ...]

    def to_json(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "token": self.token, "host": self.host,
                "tls": self.tls,
                "members": [{"name": m.name, "client_port": m.client_port,
                             "peer_port": m.peer_port} for m in self.members]}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> _State:
        members = tuple(_Member(i, str(m["name"]), int(m["client_port"]), int(m["peer_port"]))
                        for i, m in enumerate(raw["members"]))
        return cls(str(raw["token"]), str(raw["host"]), bool(raw["tls"]), members)


class LocalEtcdCluster:
    """``members`` etcd processes on ``host``, with their state in
    ``base_dir/etcd`` (see the module docstring).

    ``ports``: (client, peer) per member, instead of free ones; a cluster that
    recorded other ports, another size, host or TLS setting refuses to start
    (:class:`EtcdClusterError`): its members' data would not match. Nothing
    is written before :meth:`start`.
    """

    def __init__(self, base_dir: Path, members: int = 3, *, host: str = "127.0.0.1",
                 tls: bool = True, ports: list[tuple[int, int]] | None = None) -> None:
        if members < 1:
            raise ValueError(f"an etcd cluster needs at least one member, not {members}")
        if ports is not None and len(ports) != members:
            raise ValueError(f"{len(ports)} port pairs for {members} members")
        try:
            self._ip = ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"host must be an IP address, not {host!r}") from None
        self.base_dir = base_dir
        self.dir = base_dir / ETCD_DIR
        self.size = members
        self.host = host
        self._use_tls = tls
        self._ports = ports
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._state: _State | None = self._load_state()

    # ----------------------------------------------------------------- public

    @property
    def endpoints(self) -> list[str]:
        """The members' client URLs (``https://127.0.0.1:PORT``), member 0 first."""
        return [self._client_url(m) for m in self._members()]

    @property
    def tls(self) -> EtcdTls | None:
        """The client credentials (None when the cluster runs without TLS)."""
        if not self._use_tls:
            return None
        pki = self.dir / "pki"
        return EtcdTls(pki / "ca.crt", pki / "client.crt", pki / "client.key")

    def member_names(self) -> list[str]:
        """The names of the members this cluster was planned with."""
        return [m.name for m in self._members()]

    def log_file(self, index: int) -> Path:
        """Member ``index``'s log (its stdout and stderr)."""
        return self.dir / f"member-{index}.log"

    def start(self, timeout: float = 30) -> None:
        """Start every member that is not running, then wait (up to
        ``timeout`` seconds) until every member answers healthy. Idempotent.

        Raises :class:`EtcdClusterError` if a member exits or the cluster is
        not healthy in time; the members this call started are stopped then
        (those it found running are left alone)."""
        deadline = time.monotonic() + timeout
        first = self._state is None
        if first:
            self._plan()
        if self._use_tls:
            self._ensure_pki()
        retry = first and self._ports is None
        started: list[_Member] = []
        try:
            while True:
                for member in self._members():
                    if self._pid(member.index) is None:
                        self._spawn(member)
                        started.append(member)
                try:
                    self.wait_healthy(max(0.0, deadline - time.monotonic()))
                    return
                except _PortInUse:
                    if not retry:
                        raise
                # A port picked for this first start was taken before etcd
                # bound it: nothing is stored yet, so start over on new
                # ports, once.
                retry = False
                self._stop(started, 10)
                started = []
                for member in self._members():
                    shutil.rmtree(self._data_dir(member), ignore_errors=True)
                self._state = None
                self._plan()
        except BaseException:
            self._stop(started, 10)
            raise

    def start_member(self, index: int) -> None:
        """Start member ``index`` (after :meth:`kill`) on its data dir and
        ports; does not wait for it (see :meth:`wait_healthy`). A running
        member is left alone."""
        member = self._members()[index]
        if self._pid(index) is None:
            self._spawn(member)

    def wait_healthy(self, timeout: float = 30) -> None:
        """Wait until every member answers ``/health`` with true (it has a
        leader and a quorum). Raises :class:`EtcdClusterError` at once if a
        member is not running, or after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        pending = list(self._members())
        while True:
            for member in list(pending):
                if self._pid(member.index) is None:
                    raise self._exited(member)
                left = deadline - time.monotonic()
                if self._healthy(member, min(HEALTH_TIMEOUT, max(left, REQUEST_TIMEOUT))):
                    pending.remove(member)
            if not pending:
                return
            if time.monotonic() >= deadline:
                names = ", ".join(m.name for m in pending)
                raise EtcdClusterError(f"etcd {names} not healthy after {timeout:.0f}s; "
                                       f"see {self.dir}/member-N.log")
            time.sleep(POLL_INTERVAL)

    def pids(self) -> dict[str, int]:
        """Running members: name → pid."""
        found = {}
        for member in self._members():
            pid = self._pid(member.index)
            if pid is not None:
                found[member.name] = pid
        return found

    def leader(self) -> int | None:
        """The index of the member that is leader now (None: no running member
        knows one)."""
        return self._leader_index()

    def kill(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to member ``index`` (nothing if it is not running).
        For SIGKILL, SIGTERM and SIGINT, wait (up to 10 s) until it is gone
        and remove its pid file."""
        member = self._members()[index]
        pid = self._pid(index)
        if pid is None:
            return
        os.kill(pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            if not self._wait_gone(member, time.monotonic() + 10) and sig != signal.SIGKILL:
                self.kill(index, signal.SIGKILL)

    def stop(self, timeout: float = 10) -> None:
        """Stop every member: SIGTERM, and SIGKILL for those still running
        after ``timeout`` seconds; their pid files are removed. Idempotent."""
        if self._state is not None:
            self._stop(self._state.members, timeout)

    def member_list(self) -> list[str]:
        """The names etcd has in its member list, asked of the first running
        member that answers (a member added but never started has the name
        ``""``)."""
        for member in self._members():
            if self._pid(member.index) is None:
                continue
            try:
                status, body = self._request(member, "POST", "/v3/cluster/member/list", b"{}")
                if status == 200:
                    return [str(m.get("name", "")) for m in json.loads(body)["members"]]
            except (OSError, ValueError, KeyError, TypeError, http.client.HTTPException):
                continue
        raise EtcdClusterError("no etcd member answered the member list")

    # ----------------------------------------------------------------- state

    def _members(self) -> tuple[_Member, ...]:
        if self._state is None:
            raise EtcdClusterError(f"the etcd cluster in {self.dir} was never started")
        return self._state.members

    def _load_state(self) -> _State | None:
        path = self.dir / STATE_FILE
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            state = _State.from_json(raw)
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            raise EtcdClusterError(f"{path} is unreadable; remove {self.dir} to start "
                                   "over (its data is lost)") from None
        mismatch = []
        if len(state.members) != self.size:
            mismatch.append(f"{len(state.members)} members, not {self.size}")
        if state.host != self.host:
            mismatch.append(f"host {state.host}, not {self.host}")
        if state.tls != self._use_tls:
            mismatch.append("TLS " + ("on" if state.tls else "off"))
        if self._ports is not None and self._ports != [
                (m.client_port, m.peer_port) for m in state.members]:
            mismatch.append("other ports")
        if mismatch:
            raise EtcdClusterError(f"the etcd cluster in {self.dir} has {', '.join(mismatch)}; "
                                   f"changing that is not supported (remove {self.dir} to "
                                   "start over: its data is lost)")
        return state

    def _plan(self) -> None:
        """Choose ports, names and the token, and record them (first start)."""
        filemodes.private_dir(self.dir)
        for index in range(self.size):
            if (self.dir / f"member-{index}" / "member").exists():
                raise EtcdClusterError(f"{self.dir} has member data but no {STATE_FILE}; "
                                       f"remove {self.dir} to start over")
        pairs = self._ports or _free_port_pairs(self.host, self.size)
        members = tuple(_Member(i, f"member-{i}", client, peer)
                        for i, (client, peer) in enumerate(pairs))
        self._state = _State(f"racksmith-{secrets.token_hex(8)}", self.host, self._use_tls,
                             members)
        _write_atomic(self.dir / STATE_FILE,
                      json.dumps(self._state.to_json(), indent=2).encode() + b"\n")

    # ----------------------------------------------------------------- processes

    def _data_dir(self, member: _Member) -> Path:
        return self.dir / member.name

    def _pid_file(self, member: _Member) -> Path:
        return self.dir / f"{member.name}.pid"

    def _scheme(self) -> str:
        return "https" if self._use_tls else "http"

    def _url(self, port: int) -> str:
        host = f"[{self.host}]" if self._ip.version == 6 else self.host
        return f"{self._scheme()}://{host}:{port}"

    def _client_url(self, member: _Member) -> str:
        return self._url(member.client_port)

    def _args(self, member: _Member, binary: str) -> list[str]:
        assert self._state is not None
        cluster = ",".join(f"{m.name}={self._url(m.peer_port)}" for m in self._state.members)
        client, peer = self._client_url(member), self._url(member.peer_port)
        args = [binary, "--name", member.name, "--data-dir", str(self._data_dir(member)),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", self._state.token,
                "--heartbeat-interval", str(HEARTBEAT_MS),
                "--election-timeout", str(ELECTION_MS), "--pre-vote",
                "--quota-backend-bytes", str(QUOTA_BACKEND_BYTES),
                "--snapshot-count", str(SNAPSHOT_COUNT),
                "--max-request-bytes", str(MAX_REQUEST_BYTES),
                "--logger", "zap", "--log-outputs", "stderr"]
        if self._use_tls:
            pki = self.dir / "pki"
            ca, cert, key = pki / "ca.crt", pki / f"{member.name}.crt", pki / f"{member.name}.key"
            args += ["--client-cert-auth", "--trusted-ca-file", str(ca),
                     "--cert-file", str(cert), "--key-file", str(key),
                     "--peer-client-cert-auth", "--peer-trusted-ca-file", str(ca),
                     "--peer-cert-file", str(cert), "--peer-key-file", str(key)]
        return args

    def _spawn(self, member: _Member) -> None:
        binary = shutil.which(ETCD)
        if binary is None:
            raise EtcdClusterError("etcd is not installed (Debian package etcd-server: "
                                   "make install)")
        filemodes.private_dir(self._data_dir(member))
        args = self._args(member, binary)
        # etcd reads ETCD_* variables as flags (and refuses a flag set twice).
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        with filemodes.open_private(self.log_file(member.index), "ab") as log:
            log.write(f"{_START_MARK}{_now().isoformat()} starting: {' '.join(args)}\n".encode())
            log.flush()
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, cwd=self.dir, env=env,
                                    start_new_session=True, umask=filemodes.PRIVATE_UMASK)
        self._procs[member.index] = proc
        _write_atomic(self._pid_file(member), f"{proc.pid}\n".encode())

    def _pid(self, index: int) -> int | None:
        """Member ``index``'s pid if it runs: our child, or one adopted from
        its pid file (a live etcd on its data dir). Clears what is stale."""
        member = self._members()[index]
        proc = self._procs.get(index)
        if proc is not None:
            if proc.poll() is None:
                return proc.pid
            del self._procs[index]
            with contextlib.suppress(FileNotFoundError):
                self._pid_file(member).unlink()
            return None
        try:
            pid = int(self._pid_file(member).read_text().strip())
        except FileNotFoundError:
            return None
        except ValueError:
            pid = 0
        if pid > 0 and _is_member_process(pid, self._data_dir(member)):
            return pid
        with contextlib.suppress(FileNotFoundError):
            self._pid_file(member).unlink()
        return None

    def _wait_gone(self, member: _Member, deadline: float) -> bool:
        """Wait until ``member`` has exited (reaping our child); True if it did."""
        proc = self._procs.get(member.index)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
        while self._pid(member.index) is not None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_INTERVAL)
        return True

    def _stop(self, members: Sequence[_Member], timeout: float) -> None:
        """SIGTERM ``members``, SIGKILL those left after ``timeout`` seconds.

        In two waves: the followers together, then the leader. A member
        stopping while it has live peers takes a second (etcd gives open
        peer connections that long); a leader stopping hands its leadership
        to a peer first, and when that peer is stopping too it waits for the
        request timeout (7 s measured with all three SIGTERMed at once). The
        leader alone at the end has no one to hand over to and exits at
        once. Leader unknown: one member after the other."""
        deadline = time.monotonic() + timeout
        running = [m for m in members if self._pid(m.index) is not None]
        leader = self._leader_index() if len(running) > 1 else None
        if leader is None:
            waves = [[m] for m in running]
        else:
            waves = [[m for m in running if m.index != leader],
                     [m for m in running if m.index == leader]]
        for wave in waves:
            for member in wave:
                self._signal(member, signal.SIGTERM)
            for member in wave:
                if not self._wait_gone(member, deadline):
                    self._signal(member, signal.SIGKILL)
                    self._wait_gone(member, time.monotonic() + 10)

    def _signal(self, member: _Member, sig: int) -> None:
        pid = self._pid(member.index)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def _leader_index(self) -> int | None:
        """The index of the member that is leader, if a running member says."""
        for member in self._members():
            if self._pid(member.index) is None:
                continue
            try:
                status, body = self._request(member, "POST", "/v3/maintenance/status", b"{}")
                if status == 200:
                    reply = json.loads(body)
                    if reply["header"]["member_id"] == reply["leader"]:
                        return member.index
            except (OSError, ValueError, KeyError, TypeError, http.client.HTTPException):
                continue
        return None

    def _exited(self, member: _Member) -> EtcdClusterError:
        log = self.log_file(member.index)
        # Only what this run wrote: the log is appended across restarts.
        tail = _last_lines(log, 200).rpartition(f"\n{_START_MARK}")[2]
        if "address already in use" in tail:
            return _PortInUse(f"etcd {member.name} could not bind its ports "
                              f"({member.client_port}, {member.peer_port}); see {log}")
        detail = ""
        for line in reversed(tail.splitlines()):
            with contextlib.suppress(ValueError, AttributeError):
                entry = json.loads(line)
                if entry.get("level") in ("error", "fatal", "panic"):
                    detail = f": {entry.get('msg', '')}: {entry.get('error', '')}"[:300]
                    break
        return EtcdClusterError(f"etcd {member.name} is not running{detail}; see {log}")

    # ----------------------------------------------------------------- HTTP

    def _request(self, member: _Member, method: str, path: str, body: bytes | None = None,
                 timeout: float = REQUEST_TIMEOUT) -> tuple[int, bytes]:
        conn: http.client.HTTPConnection
        if self._use_tls:
            tls = self.tls
            assert tls is not None
            conn = http.client.HTTPSConnection(self.host, member.client_port,
                                               timeout=min(timeout, REQUEST_TIMEOUT),
                                               context=tls.ssl_context())
        else:
            conn = http.client.HTTPConnection(self.host, member.client_port,
                                              timeout=min(timeout, REQUEST_TIMEOUT))
        try:
            # Connect and shake hands within REQUEST_TIMEOUT (a port held by
            # something else may accept and never answer), then give the
            # request its own timeout.
            conn.connect()
            assert conn.sock is not None
            conn.sock.settimeout(timeout)
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def _healthy(self, member: _Member, timeout: float) -> bool:
        try:
            status, body = self._request(member, "GET", "/health", timeout=timeout)
            return status == 200 and json.loads(body).get("health") == "true"
        except (OSError, ValueError, http.client.HTTPException):
            return False

    # ----------------------------------------------------------------- PKI

    def _ensure_pki(self) -> None:
        pki = filemodes.private_dir(self.dir / "pki")
        ca_path, ca_key_path = pki / "ca.crt", pki / "ca.key"
        if not ca_path.exists() and not ca_key_path.exists():
            ca = certs.new_ca("racksmith-etcd-ca")
            _write_atomic(ca_key_path, ca.key_pem)
            _write_atomic(ca_path, ca.cert_pem)
        else:
            ca = _load_ca(ca_path, ca_key_path, self.dir)
        ca_cert = ca.certificate()
        # a member's certificate serves clients and peers (EKU server and client
        # auth, as kubeadm issues etcd's); the clients' is a client's only
        hosts = ["localhost", *sorted({str(self._ip), "127.0.0.1"})]
        for member in self._members():
            cert, key = pki / f"{member.name}.crt", pki / f"{member.name}.key"
            if not _leaf_is_current(cert, key, ca_cert):
                _write_leaf(cert, key, certs.issue_serving(ca, member.name, hosts, client=True))
        cert, key = pki / "client.crt", pki / "client.key"
        if not _leaf_is_current(cert, key, ca_cert):
            _write_leaf(cert, key, certs.issue_client(ca, "racksmith-etcd-client"))
        for path in pki.iterdir():
            filemodes.private_file(path)


# --------------------------------------------------------------------------- helpers


def _free_port_pairs(host: str, count: int) -> list[tuple[int, int]]:
    """``count`` (client, peer) pairs of ports free on ``host``, all distinct
    (every socket is held until all are chosen)."""
    family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    socks: list[socket.socket] = []
    try:
        for _ in range(2 * count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind((host, 0))
        ports = [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()
    return [(ports[2 * i], ports[2 * i + 1]) for i in range(count)]


def _is_member_process(pid: int, data_dir: Path) -> bool:
    """Whether ``pid`` is a live etcd serving ``data_dir`` (a pid file may
    outlive its process, and the pid be reused)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False  # gone (a zombie's cmdline is empty: also gone)
    if not argv or not argv[0].endswith(b"etcd"):
        return False
    want = str(data_dir).encode()
    return any(a == b"--data-dir" and b == want for a, b in itertools.pairwise(argv))


def _last_lines(path: Path, count: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read()
    except OSError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-count:])


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (0600) through a temp file and a rename."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        filemodes.write_private(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _load_ca(cert_path: Path, key_path: Path, cluster_dir: Path) -> certs.KeyPair:
    try:
        ca = certs.KeyPair(cert_path.read_bytes(), key_path.read_bytes())
        cert, key = ca.certificate(), ca.private_key()
    except (OSError, ValueError, TypeError):
        raise EtcdClusterError(f"cannot read the etcd CA in {cert_path.parent}; remove "
                               f"{cluster_dir} to start over (its data is lost)") from None
    if key.public_key() != cert.public_key():
        raise EtcdClusterError(f"{key_path} does not belong to {cert_path}")
    return ca


def _leaf_is_current(cert_path: Path, key_path: Path, ca_cert: x509.Certificate) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        cert.verify_directly_issued_by(ca_cert)
    except (OSError, ValueError, TypeError, InvalidSignature):
        return False
    return (isinstance(key, ec.EllipticCurvePrivateKey)
            and key.public_key() == cert.public_key()
            and cert.not_valid_after_utc - RENEW_BEFORE > _now())


def _write_leaf(cert_path: Path, key_path: Path, pair: certs.KeyPair) -> None:
    _write_atomic(key_path, pair.key_pem)
    _write_atomic(cert_path, pair.cert_pem)
