"""A randomised chaos soak: hosts joined to a one-node hub, steady traffic (keyed one-way
sends, U1 round trips, `poll --wait` readers) and a fault every few seconds, then heal, drain
and classify every send with :mod:`chaos_checker`. Prints its schedule number first;
``--schedule N`` replays the same faults. Root, minutes: not in run_all.py. Method and
figures: docs/reliability.md ("Chaos soak"). ``--cluster``: the hub is a three-node cluster
(the hub machine and two node machines), with node kills and node partitions among the faults.

    sudo .venv/bin/python bench/chaos.py [--seconds 120] [--schedule N] [--hosts 4] [--cluster]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from chaos_checker import CLASSES, Delivery, Send, check  # noqa: E402

from bridgecli.send_ids import keyed_id  # noqa: E402

MSG_ID_KEY = '"msgId"'
#: fault kind -> relative weight in the schedule
FAULTS = {
    "gateway kill -9 + restart": 3,
    "partition + heal": 3,
    "gateway SIGSTOP > heartbeat + SIGCONT": 2,
    "poll client kill -9 after hand-off": 3,
    "registrar kill -9 + restart": 1,
    "broker kill -9 + restart": 1,
}
#: the faults added by ``--cluster``, on a node machine that is not the hub (one at a time)
CLUSTER_FAULTS = {
    "node kill -9 + restart": 2,
    "node partition + heal": 2,
}
#: the node machines of ``--cluster`` and their last address octet
NODE_MACHINES = {"node1": 31, "node2": 32}


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def new_lab(root: Path, hosts: int, nodes: tuple[str, ...] = ()) -> Any:
    """The namespace lab for a hub, ``hosts`` hosts and the node machines ``nodes`` (not set
    up yet)."""
    from tests.support import netns

    names = tuple(f"host{chr(ord('A') + i)}" for i in range(hosts))
    for i, name in enumerate(names):
        netns.HOST_OCTETS.setdefault(name, 11 + i)
    for node in nodes:
        netns.HOST_OCTETS.setdefault(node, NODE_MACHINES[node])
    return netns.NetnsLab(root, hosts=(*names, *nodes), start_broker=False, prefix=f"bc{os.getpid()}")


def build_lab(lab: Any, nodes: tuple[str, ...] = ()) -> None:
    """The hub and the lab's hosts joined, with their gateways (hub_lab.build, N joiners).
    With ``nodes``: the hub starts with ``--cluster``, the node machines join it as nodes
    (tests/multihost/test_hub_nodes.py), then the hosts join, each with the nodes in its
    broker.uri in another order (rotated by one per host), so that they spread over nodes."""
    from tests.multihost import hub_lab

    lab.setup()
    for name in lab.hosts:
        for key in ("BRIDGE_BROKER_URI", "BRIDGE_HOST_ID"):
            lab.host(name).env.pop(key, None)
    hub_lab.hub_home(lab)
    if nodes:
        lab.bridge("hub", "hub", "start", "--listen", lab.broker_addr, "--cluster", timeout=180)
        lab.start_gateway("hub")
        for node in nodes:
            line = lab.bridge("hub", "hub", "invite", "--node", node, "--address", lab.addr(node)).stdout.strip()
            joined = lab.bridge_json(node, "join", "--node", line, timeout=240)
            log(f"{node} joined the cluster in {joined['seconds']}s ({joined['queues_grown']} quorum queues grown)")
    else:
        lab.bridge("hub", "broker", "start", timeout=180)
        lab.start_gateway("hub")
        mark = len(lab.gateway_text("hub"))
        lab.bridge("hub", "hub", "start", "--listen", lab.broker_addr, timeout=180)
        lab.wait_log("hub", "connected to broker", timeout=60, after=mark)
    for i, name in enumerate(n for n in lab.hosts if n not in nodes):
        hub_lab.join(lab, name)
        if nodes:
            config = lab.host(name).home.config_file
            uris = hub_lab.broker_uri(lab, name).split(",")
            turn = i % len(uris)
            config.write_text(config.read_text().replace(",".join(uris), ",".join(uris[turn:] + uris[:turn])))
            log(f"{name}: broker.uri starts with {uris[turn].rsplit('@', 1)[-1]}")
        lab.start_gateway(name)


class Soak:
    """The traffic threads, the fault loop and their records."""

    def __init__(
        self, lab: Any, names: tuple[str, ...], schedule: int, u1: bool = True, nodes: tuple[str, ...] = ()
    ) -> None:
        from tests.multihost.helpers import register, wait_announced

        self.lab, self.names, self.schedule = lab, names, schedule
        #: the node machines of a cluster hub (none: a one-node hub)
        self.nodes = nodes
        #: True once `rabbitmq-queues check_if_node_is_quorum_critical` hung: running nodes suffice
        self.quorum_check_hangs = False
        self.rng = random.Random(schedule)
        self.inbox: dict[str, str] = {}
        self.main: dict[str, str] = {}
        self.asker: dict[str, str] = {}
        self.u1 = u1
        self.answered: set[str] = set()
        self.answer_seq: Counter[str] = Counter()
        self.asks: Counter[str] = Counter()
        self.round_trips: list[float] = []
        for name in names:
            self.inbox[name] = register(lab, name, f"chaos-{name}-inbox", role="agent", deliver="hold")
            self.main[name] = register(lab, name, f"chaos-{name}-main", role="main")
            self.asker[name] = register(lab, name, f"chaos-{name}-asker", role="agent", deliver="hold")
        for name in names:
            for other in names:
                wait_announced(lab, name, self.inbox[other], timeout=60)
        self.lock = threading.Lock()
        self.sends: list[Send] = []
        self.send_errors: Counter[str] = Counter()
        self.deliveries: list[Delivery] = []
        self.read_seq: Counter[str] = Counter()
        self.polls = Counter[str]()
        self.faults: Counter[str] = Counter()
        self.poll_kills: list[str] = []
        #: ids a poll client printed before it was killed (the gateway holds them again)
        self.killed_reads: set[str] = set()
        self.kinds = list(FAULTS) + (list(CLUSTER_FAULTS) if nodes else [])
        self.fault_log: list[str] = []
        self.notes: list[str] = []
        self.sending = threading.Event()
        self.polling = threading.Event()
        self.poll_procs: dict[str, subprocess.Popen | None] = {name: None for name in names}
        #: tries left to kill a poll client of this host's inbox as it prints what it was handed
        self.kill_next_poll: dict[str, int] = {name: 0 for name in names}

    # --- traffic ----------------------------------------------------------------------
    def sender(self, name: str) -> None:
        rng = random.Random(f"{self.schedule}-{name}")
        others = [n for n in self.names if n != name]
        seq = 0
        while self.sending.is_set():
            to = rng.choice(others)
            key = f"c{self.schedule}-{name}-{seq}"
            msg_id = keyed_id(self.main[name], key)
            try:
                result = self.lab.bridge(
                    name,
                    "send",
                    self.inbox[to],
                    key,
                    "--from",
                    self.main[name],
                    "--key",
                    key,
                    "--force",
                    check=False,
                    timeout=60,
                )
                confirmed = result.returncode == 0
                printed = result.stdout.strip()
                if confirmed and printed != msg_id:
                    self.notes.append(f"send {key} printed {printed!r}, expected {msg_id}")
                why = f"exit {result.returncode}: {result.stderr.strip()[-160:]}"
            except subprocess.TimeoutExpired:
                confirmed, why = False, "timed out (60 s)"
            with self.lock:
                self.sends.append(Send(self.main[name], self.inbox[to], msg_id, seq, confirmed))
                if not confirmed:
                    self.send_errors[why.split(":")[0]] += 1
                    if sum(self.send_errors.values()) <= 5:
                        self.notes.append(f"send {key} failed, {why}")
            seq += 1
            time.sleep(rng.uniform(0.0, 0.2))

    def record(self, gid: str, messages: list[dict[str, Any]]) -> None:
        with self.lock:
            for message in messages:
                self.read_seq[gid] += 1
                self.deliveries.append(
                    Delivery(
                        gid,
                        message.get("msgId") or message.get("id"),
                        self.read_seq[gid],
                        bool(message.get("redelivered")),
                    )
                )

    def asker_loop(self, name: str) -> None:
        """U1 round trips: `bridge ask --wait` to another host's inbox, whose poller answers."""
        rng = random.Random(f"{self.schedule}-{name}-ask")
        others = [n for n in self.names if n != name]
        seq = 0
        while self.sending.is_set():
            to = rng.choice(others)
            key = f"u{self.schedule}-{name}-{seq}"
            msg_id = keyed_id(self.asker[name], key)
            t0 = time.monotonic()
            args = ["ask", self.inbox[to], key, "--from", self.asker[name], "--key", key, "--force"]
            try:
                result = self.lab.bridge(name, *args, "--wait", "20s", "--json", check=False, timeout=60)
                code = result.returncode
            except subprocess.TimeoutExpired:
                code, result = -1, None
            self.asks[{0: "answered", 8: "timed out (8)"}.get(code, f"failed (exit {code})")] += 1
            if code == 0 and result is not None:
                self.round_trips.append(time.monotonic() - t0)
                try:
                    reply = json.loads(result.stdout).get("reply")  # the ANSWER, beside the ASK's own id
                    self.record(self.asker[name], [reply] if reply else [])
                    if not reply:
                        self.notes.append(f"ask {key}: exit 0 without a reply: {result.stdout[:120]!r}")
                except (ValueError, AttributeError):
                    self.notes.append(f"ask {key}: no JSON answer: {result.stdout[:120]!r}")
            with self.lock:  # exit 8: the ask went out, its late answer is held for the asker's poll
                self.sends.append(Send(self.asker[name], self.inbox[to], msg_id, seq, code in (0, 8)))
            seq += 1
            time.sleep(rng.uniform(0.0, 0.5))

    def answer(self, name: str, ask: dict[str, Any]) -> None:
        """Answer an ASK read from ``name``'s inbox (once per ask id, with a retry key)."""
        ask_id, inbox = ask.get("msgId", ""), self.inbox[name]
        if ask_id in self.answered:
            return
        self.answered.add(ask_id)
        key = f"a-{ask_id}"
        result = self.lab.bridge(name, "answer", ask_id, f"answer {ask_id}", "--from", inbox, "--key", key, check=False)
        with self.lock:
            self.answer_seq[inbox] += 1
            sender_to = ask.get("from", "")
            self.sends.append(
                Send(inbox, sender_to, keyed_id(inbox, key), self.answer_seq[inbox], result.returncode == 0)
            )
            if result.returncode != 0:
                self.send_errors[f"answer exit {result.returncode}"] += 1

    @staticmethod
    def kill_at_output(proc: subprocess.Popen) -> tuple[str, str]:
        """SIGKILL ``proc`` as soon as its stdout has a byte: `bridge poll` prints what the gateway
        handed it and only then confirms, so this lands after the hand-off, around the confirm."""
        import select

        assert proc.stdout is not None and proc.stderr is not None
        fd, chunks = proc.stdout.fileno(), []
        ready, _, _ = select.select([fd], [], [], 60)
        if ready:
            chunks.append(os.read(fd, 1 << 20))
        proc.kill()
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        proc.wait(10)
        return b"".join(chunks).decode(errors="replace"), proc.stderr.read()

    def poller(self, name: str, gid: str) -> None:
        """Read ``gid``'s hold with `bridge poll --wait 3s --json`, one client after another."""
        from tests.support.env import BRIDGE_BIN

        host = self.lab.host(name)
        while self.polling.is_set():
            proc = subprocess.Popen(
                ["ip", "netns", "exec", host.ns, BRIDGE_BIN, "poll", "--as", gid, "--wait", "3s"]
                + ["--limit", "1000", "--json"],
                env=host.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            kill = gid == self.inbox[name] and self.kill_next_poll[name] > 0
            if kill:
                out, err = self.kill_at_output(proc)
                handed = MSG_ID_KEY in out
                self.kill_next_poll[name] = 0 if handed else self.kill_next_poll[name] - 1
            else:
                try:
                    out, err = proc.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
            self.polls[f"rc {proc.returncode}"] += 1
            try:
                messages = json.loads(out)["messages"] if out.strip() else []
            except (ValueError, KeyError):
                messages = []
                self.notes.append(f"{name}: poll printed no JSON (exit {proc.returncode}): {out[:120]!r}")
            if kill:
                self.killed_reads.update(m.get("msgId", "") for m in messages)
                self.poll_kills.append(
                    f"{name}: exit {proc.returncode}, {out.count(MSG_ID_KEY)} messages in its output, "
                    f"{len(messages)} of them in complete JSON (recorded as read)"
                )
            self.record(gid, messages)
            if gid == self.inbox[name]:
                for message in messages:
                    if str(message.get("kind", "")).upper() == "ASK":
                        self.answer(name, message)
            if proc.returncode not in (0, -9) and not messages:
                time.sleep(0.5)  # the gateway is down or stopped: do not spin

    # --- faults -----------------------------------------------------------------------
    def gateway_pid(self, name: str) -> int | None:
        proc = self.lab.host(name).gateway
        return proc.pid if proc is not None and proc.poll() is None else None

    def ensure_gateway(self, name: str) -> None:
        if self.gateway_pid(name) is None:
            try:
                self.lab.stop_gateway(name)
                self.lab.start_gateway(name, timeout=90)
            except AssertionError as exc:
                self.notes.append(f"gateway {name} did not come back: {str(exc)[:200]}")

    def hub_status(self) -> dict[str, Any]:
        return json.loads(self.lab.bridge("hub", "hub", "status", "--json", check=False).stdout or "{}")

    def hub_start(self) -> None:
        result = self.lab.bridge("hub", "hub", "start", check=False, timeout=180)
        if result.returncode != 0:
            self.notes.append(f"hub start after a fault: exit {result.returncode}: {result.stderr.strip()[-200:]}")

    # --- the cluster ----------------------------------------------------------------------
    def node_ctl(self, machine: str, tool: str, *args: str, timeout: float = 20.0) -> tuple[int, str]:
        """``tool -n NODE ARGS`` for ``machine``'s own node, with that node's CLI environment
        (its TLS distribution files and cookie: ClusterNode.ctl), inside its namespace; a
        command that gathers from every node would hang, these ask the one node only.
        Returns (exit code, output); (-1, "timed out") when it hangs."""
        script = (
            "import sys\n"
            "from bridgecli.hub import cluster\n"
            f"r = cluster.local_node()[0].ctl(*sys.argv[2:], tool=sys.argv[1], check=False, timeout={timeout - 5})\n"
            "print(r.stdout.strip() or r.stderr.strip()[-300:])\n"
            "sys.exit(r.returncode)\n"
        )
        host = self.lab.host(machine)
        try:
            result = subprocess.run(
                ["ip", "netns", "exec", host.ns, sys.executable, "-c", script, tool, *args],
                env={**host.env, "PYTHONPATH": str(ROOT)},
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return -1, "timed out"
        return result.returncode, (result.stdout.strip() or result.stderr.strip()[-300:])

    def cluster_problem(self) -> str:
        """Why the cluster is not yet fit for the next node fault ("" when it is): a node not
        running, or a node whose loss would cost a quorum queue its majority (when that check
        hangs, as the node's CLI did in this lab: all nodes running, then 5 s more)."""
        for machine in ("hub", *self.nodes):  # any running member can list the nodes
            result = self.lab.bridge(machine, "hub", "nodes", "--json", check=False, timeout=60)
            if result.returncode == 0:
                break
        else:
            return "no machine answers `bridge hub nodes`"
        down = [n["name"] for n in json.loads(result.stdout)["nodes"] if not n["running"]]
        if down:
            return f"not running: {', '.join(down)}"
        if self.quorum_check_hangs:
            time.sleep(5.0)
            return ""
        code, out = self.node_ctl("hub", "rabbitmq-queues", "check_if_node_is_quorum_critical")
        if code != 0:  # the node's own CLI hangs or fails in this lab: nodes running + 5 s
            self.quorum_check_hangs = True
            self.notes.append(
                f"check_if_node_is_quorum_critical on the hub: exit {code}: {out[-160:]!r}; "
                "waiting for all nodes running + 5 s instead"
            )
            time.sleep(5.0)
        return ""

    def wait_cluster(self, timeout: float = 240.0) -> str:
        """Wait until :meth:`cluster_problem` is empty; returns how long that took, or why not."""
        t0 = time.monotonic()
        problem = "?"
        while time.monotonic() - t0 < timeout:
            problem = self.cluster_problem()
            if not problem:
                return f"healthy after {time.monotonic() - t0:.1f}s"
            time.sleep(1.0)
        self.notes.append(f"cluster not healthy after {timeout:g}s: {problem}")
        return f"NOT healthy after {timeout:g}s: {problem}"

    def node_pid(self, machine: str) -> int | None:
        try:
            state = json.loads((self.lab.host(machine).home.data_dir / "broker" / "state.json").read_text())
        except (OSError, ValueError):
            return None
        return int(state["pid"]) if state.get("pid") else None

    def node_start(self, machine: str) -> str:
        """`bridge broker start` on a node machine (its saved cluster settings)."""
        t0 = time.monotonic()
        result = self.lab.bridge(machine, "broker", "start", check=False, timeout=180)
        if result.returncode != 0:
            self.notes.append(f"broker start on {machine}: exit {result.returncode}: {result.stderr.strip()[-200:]}")
        return f"started in {time.monotonic() - t0:.1f}s"

    def inject(self, kind: str) -> str:
        rng, lab = self.rng, self.lab
        name = rng.choice(self.names)
        if self.nodes and kind in ("node kill -9 + restart", "node partition + heal", "broker kill -9 + restart"):
            problem = self.cluster_problem()  # never two nodes down at once
            if problem:
                waited = self.wait_cluster()
                if waited.startswith("NOT"):
                    return f"skipped: {waited}"
        if kind == "node kill -9 + restart":
            machine = rng.choice(self.nodes)
            down = rng.uniform(2.0, 6.0)
            pid = self.node_pid(machine)
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(down)
            started = self.node_start(machine)
            return f"{machine} pid {pid}, down {down:.1f}s, {started}, {self.wait_cluster()}"
        if kind == "node partition + heal":
            machine = rng.choice(self.nodes)
            cut = rng.uniform(3.0, 10.0)
            lab.partition(machine)
            time.sleep(cut)
            lab.heal(machine)
            return f"{machine}, cut {cut:.1f}s, {self.wait_cluster()}"
        if kind == "gateway kill -9 + restart":
            down = rng.uniform(0.5, 4.0)
            lab.stop_gateway(name, signal.SIGKILL)
            time.sleep(down)
            self.ensure_gateway(name)
            return f"{name}, down {down:.1f}s"
        if kind == "partition + heal":
            cut = rng.uniform(3.0, 10.0)
            lab.partition(name)
            time.sleep(cut)
            lab.heal(name)
            return f"{name}, cut {cut:.1f}s"
        if kind == "gateway SIGSTOP > heartbeat + SIGCONT":
            stop = rng.uniform(5.0, 9.0)  # the heartbeat is 2 s: the broker drops the connection
            pid = self.gateway_pid(name)
            if pid is None:
                return f"{name}: no gateway running, skipped"
            os.killpg(pid, signal.SIGSTOP)
            time.sleep(stop)
            os.killpg(pid, signal.SIGCONT)
            return f"{name}, stopped {stop:.1f}s"
        if kind == "poll client kill -9 after hand-off":
            self.kill_next_poll[name] = 5  # until one is killed with messages in hand, 5 tries
            time.sleep(3.0)
            return f"{name}'s inbox poll client, at its first byte of output"
        if kind == "registrar kill -9 + restart":
            pid = (self.hub_status().get("registrar") or {}).get("pid")
            if pid:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(rng.uniform(0.5, 3.0))
            self.hub_start()
            return f"pid {pid}"
        if kind == "broker kill -9 + restart":
            pid = (self.hub_status().get("broker") or {}).get("pid")
            if pid:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(rng.uniform(0.5, 3.0))
            t0 = time.monotonic()
            self.hub_start()
            back = f"pid {pid}, node back in {time.monotonic() - t0:.1f}s"
            return f"{back}, {self.wait_cluster()}" if self.nodes else back
        raise ValueError(kind)

    def heal_all(self) -> None:
        for name in (*self.names, *self.nodes):
            self.lab.heal(name)
            pid = self.gateway_pid(name)
            if pid is not None:
                try:
                    os.killpg(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        status = self.hub_status()
        if not (status.get("registrar") or {}).get("alive") or not status.get("running"):
            self.hub_start()
        for machine in self.nodes:
            pid = self.node_pid(machine)
            if not pid or not os.path.exists(f"/proc/{pid}"):
                self.node_start(machine)
        for name in (*self.names, "hub"):
            self.ensure_gateway(name)
        if self.nodes:
            self.wait_cluster()

    # --- the run ----------------------------------------------------------------------
    def run(self, seconds: float, drain: float) -> None:
        self.sending.set()
        self.polling.set()
        threads = [threading.Thread(target=self.sender, args=(n,), daemon=True) for n in self.names]
        if self.u1:
            threads += [threading.Thread(target=self.asker_loop, args=(n,), daemon=True) for n in self.names]
        pollers = [threading.Thread(target=self.poller, args=(n, self.inbox[n]), daemon=True) for n in self.names]
        pollers += [threading.Thread(target=self.poller, args=(n, self.asker[n]), daemon=True) for n in self.names]
        for thread in threads + pollers:
            thread.start()
        kinds = self.kinds
        weights = [{**FAULTS, **CLUSTER_FAULTS}[kind] for kind in kinds]
        start = time.monotonic()
        time.sleep(self.rng.uniform(2.0, 5.0))
        while time.monotonic() - start < seconds:
            kind = self.rng.choices(kinds, weights)[0]
            t0 = time.monotonic()
            try:
                what = self.inject(kind)
            except Exception as exc:  # a fault that failed to inject is reported, the soak goes on
                what = f"FAILED: {type(exc).__name__}: {str(exc)[:200]}"
                self.heal_all()
            self.faults[kind] += 1
            self.fault_log.append(f"{t0 - start:6.1f}s {kind}: {what} ({time.monotonic() - t0:.1f}s)")
            log(self.fault_log[-1])
            time.sleep(self.rng.uniform(1.0, 5.0))
        self.sending.clear()
        for thread in threads:
            thread.join(90)
        log("traffic stopped; healing and draining")
        self.heal_all()
        deadline, last_change, last_count = time.monotonic() + drain, time.monotonic(), -1
        while time.monotonic() < deadline:
            with self.lock:  # answers to late asks are still being sent: read the sends afresh
                confirmed = {s.msg_id for s in self.sends if s.confirmed}
                got = {d.msg_id for d in self.deliveries}
                count = len(self.deliveries)
            if confirmed <= got and time.monotonic() - last_change > 8:
                break  # everything is in, and a few quiet polls caught late duplicates
            if count != last_count:
                last_count, last_change = count, time.monotonic()
            elif time.monotonic() - last_change > 45:
                break
            time.sleep(1.0)
        self.polling.clear()
        for thread in pollers:
            thread.join(30)


def report(soak: Soak, schedule: int, seconds: float, elapsed: float) -> bool:
    verdict = check(soak.sends, soak.deliveries)
    totals = verdict.totals()
    print()
    hub = f"a {1 + len(soak.nodes)}-node cluster hub" if soak.nodes else "hub"
    print(f"schedule {schedule}, {seconds:g} s of faults, {len(soak.names)} hosts + {hub}, {elapsed:.0f} s in all")
    print()
    print("| sends | " + " | ".join(CLASSES) + " | unexpected | unknown but delivered |")
    print("| --- " * (len(CLASSES) + 3) + "|")
    print(
        f"| {len(soak.sends)} | "
        + " | ".join(str(totals[c]) for c in CLASSES)
        + f" | {totals['unexpected']} | {verdict.unknown_delivered} |"
    )
    print()
    print("| fault | injected |")
    print("| --- | --- |")
    for kind in [*FAULTS, *(CLUSTER_FAULTS if soak.nodes else ())]:
        print(f"| {kind} | {soak.faults.get(kind, 0)} |")
    print()
    roles = {**{g: "one-way" for g in soak.main.values()}, **{g: "ask" for g in soak.asker.values()}}
    kinds = Counter(roles.get(send.sender, "answer") for send in soak.sends)
    print(f"sends by kind: {dict(kinds)}; deliveries read: {len(soak.deliveries)}; poll exits: {dict(soak.polls)}")
    print(f"failed sends by exit: {dict(soak.send_errors)}")
    if soak.u1:
        trips = sorted(soak.round_trips)
        median = f"{trips[len(trips) // 2]:.2f}s" if trips else "-"
        print(f"U1 asks: {dict(soak.asks)}; round trip median {median}, max {max(trips, default=0):.2f}s")
    for line in soak.poll_kills:
        print("poll client killed:", line)
    print("faults:")
    for line in soak.fault_log:
        print("  " + line)
    for note in soak.notes[:30]:
        print("note:", note)
    bad = [(mid, cls) for mid, cls in verdict.classes.items() if cls in ("lost", "duplicated")]
    for mid, cls in bad[:20]:
        send = next(s for s in soak.sends if s.msg_id == mid)
        why = " (a killed poll client printed it first)" if mid in soak.killed_reads else ""
        print(f"{cls}: {mid} seq {send.seq} {send.sender} -> {send.recipient} confirmed={send.confirmed}{why}")
    flagged = {mid for mid, cls in verdict.classes.items() if cls == "redelivered"}
    if flagged:
        print(
            f"{len(flagged)} redelivered (flagged) ids, {len(flagged & soak.killed_reads)} of them printed by a poll "
            "client killed before its confirm (docs/protocol.md, 'The last hop is two-phase')"
        )
    for delivery in verdict.unexpected[:20]:
        print(f"unexpected: {delivery}")
    print("PASS" if verdict.passed else "FAIL", "(the bar: 0 lost, 0 duplicated, 0 unexpected)")
    return verdict.passed


def cli() -> int:
    """Not called ``main``: bench/run_all.py runs every script's ``main``, and this one needs root
    and minutes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--schedule", type=int, default=None, help="the RNG's start value (default: random)")
    parser.add_argument("--hosts", type=int, default=4, choices=range(2, 8))
    parser.add_argument("--drain", type=float, default=120.0, help="at most this long to drain after the faults")
    parser.add_argument("--no-u1", action="store_true", help="one-way sends only, no ask/answer round trips")
    parser.add_argument("--only", default="", help="only the fault kinds whose name contains this text")
    parser.add_argument("--keep", action="store_true", help="keep the lab's directory (logs) afterwards")
    parser.add_argument(
        "--cluster", action="store_true", help="a 3-node cluster hub (two node machines), node faults added"
    )
    args = parser.parse_args()
    schedule = args.schedule if args.schedule is not None else random.SystemRandom().randrange(1, 1_000_000)
    print(f"schedule {schedule}", flush=True)
    from tests.support.netns import netns_supported

    reason = netns_supported()
    if reason:
        print(f"skipped: {reason}")
        return 2
    root = Path(tempfile.mkdtemp(prefix="bchaos", dir="/tmp"))
    nodes = tuple(NODE_MACHINES) if args.cluster else ()
    lab = new_lab(root, args.hosts, nodes)
    started = time.monotonic()
    try:
        log("building the lab")
        build_lab(lab, nodes)
        names = tuple(n for n in lab.members if n != "hub" and n not in nodes)
        soak = Soak(lab, names, schedule, u1=not args.no_u1, nodes=nodes)
        soak.kinds = [kind for kind in soak.kinds if args.only in kind]
        log(f"lab up in {time.monotonic() - started:.0f}s; soaking for {args.seconds:g}s")
        soak.run(args.seconds, args.drain)
        return 0 if report(soak, schedule, args.seconds, time.monotonic() - started) else 1
    finally:
        failures = lab.teardown()  # error lines in gateway logs are expected under chaos
        print(f"teardown: {len(failures)} gateway log checks flagged (expected under faults)")
        if args.keep:
            print(f"lab directory kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(cli())
