"""A Ray cluster made of ``ray start`` processes, for tests inside their network namespace.

Each node is one ``ray start --block`` process (its own temp dir under ``RAY_TMPDIR``,
its CPUs, a custom resource named after it). It is stopped by its pid: SIGTERM to the
``ray start`` process (which ends what it started), then SIGKILL to every process of its
tree still alive, pids collected before anything was killed. Ray's own stop command is never used:
it ends every Ray process on the machine by name.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
PORT = 6380
# Notice a dead node within seconds (Ray's default is about 15 s).
FAST_HEALTH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "4",
               "RAY_health_check_initial_delay_ms": "1000"}


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Node:
    def __init__(self, name: str, proc: subprocess.Popen, log: Path) -> None:
        self.name, self.proc, self.log = name, proc, log
        self.seen: set[int] = set()  # pids of its tree, kept for after its raylet is gone
        self.id: str | None = None   # the Ray node id, once the cluster knows it

    def remember(self) -> None:
        self.seen.update(descendants(self.proc.pid))

    def raylet(self) -> int:
        self.remember()
        (pid,) = [p for p in descendants(self.proc.pid) if comm(p) == "raylet"]
        return pid


class Cluster:
    """``with Cluster(log_dir) as c: c.start("head", 1, head=True); c.start("w", 1)``."""

    def __init__(self, log_dir: Path, env: dict[str, str] | None = None, prefix: str = "") -> None:
        self.log_dir, self.nodes, self.prefix = Path(log_dir), [], prefix  # prefix: each cluster's own temp dirs
        self.env = {**os.environ, **FAST_HEALTH, **(env or {})}
        self.address = f"127.0.0.1:{PORT}"
        self.root = Path(os.environ["RAY_TMPDIR"])  # short (socket paths), inside tmp_path (tests/netns.py)

    def start(self, name: str, cpus: int, *, head: bool = False, hide: Path | None = None) -> Node:
        """Start a node. ``hide``: a directory this node cannot see (a tmpfs mounted over it in a
        mount namespace of its own): a node that does not share the store's filesystem.

        Ray gives a starting raylet 30 s to register, which a starved machine can miss: a node
        that did not start is stopped (by pid) and started again, three tries in all."""
        for attempt in range(3):
            try:
                return self._start(name, cpus, head, hide, f"{self.prefix}{name}{attempt}")
            except RuntimeError:
                self._stop_node(self.nodes.pop())
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _start(self, name: str, cpus: int, head: bool, hide: Path | None, tag: str) -> Node:
        args = [RAY, "start", "--block", "--node-ip-address", "127.0.0.1", "--temp-dir", str(self.root / tag),
                "--num-cpus", str(cpus), "--resources", json.dumps({name: 1}), "--object-store-memory", "80000000",
                "--disable-usage-stats"]
        args += ["--head", "--port", str(PORT), "--include-dashboard", "false"] if head else ["--address", self.address]
        if hide is not None:
            args = ["unshare", "--mount", "sh", "-c", 'mount -t tmpfs tmpfs "$0" && exec "$@"', str(hide)] + args
        log = self.log_dir / f"ray-{tag}.log"
        with open(log, "w") as fh:
            proc = subprocess.Popen(args, env=self.env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        node = Node(name, proc, log)
        self.nodes.append(node)
        deadline = time.time() + 180
        while "Ray runtime started" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"ray node {name} did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        node.remember()
        return node

    def wait_nodes(self, timeout: float = 120) -> dict[str, str]:
        """Wait until every started node is alive in the cluster; returns name -> Ray node id."""
        names = [n.name for n in self.nodes]
        code = (f"import json, ray; ray.init(address={self.address!r}, log_to_driver=False, include_dashboard=False); "
                "print(json.dumps([(n['NodeID'], sorted(n['Resources'])) for n in ray.nodes() if n['Alive']]))")
        deadline = time.time() + timeout
        while True:
            r = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True,
                               timeout=timeout)
            if r.returncode == 0:
                ids = {name: nid for nid, res in json.loads(r.stdout.strip().splitlines()[-1]) for name in names
                       if name in res}
                if len(ids) == len(names):
                    for n in self.nodes:
                        n.id = ids[n.name]
                    return ids
            if time.time() > deadline:
                raise RuntimeError(f"cluster nodes {names} not all alive: {r.stdout[-500:]} {r.stderr[-2000:]}")
            time.sleep(1)

    def kill_raylet(self, node: Node) -> None:
        """SIGKILL the node's raylet: to the cluster, the node is lost with all it runs."""
        os.kill(node.raylet(), signal.SIGKILL)

    def stop(self) -> None:
        for node in self.nodes:
            node.remember()
        for node in reversed(self.nodes):  # worker nodes first, the head last
            if node.proc.poll() is None:
                node.proc.terminate()
        for node in reversed(self.nodes):
            self._stop_node(node)

    @staticmethod
    def _stop_node(node: Node) -> None:
        """SIGTERM its ``ray start`` (which ends what it started), then SIGKILL its tree's leftovers."""
        node.remember()
        if node.proc.poll() is None:
            node.proc.terminate()
        try:
            node.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            node.proc.kill()
            node.proc.wait(timeout=30)
        for pid in node.seen:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        for pid in node.seen:  # orphans were adopted by the namespace's first process: us
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_process(proc: subprocess.Popen) -> None:
    """SIGKILL a process started with ``start_new_session`` and its group, by its pid."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)
