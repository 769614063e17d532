"""A real one-node Slurm cluster (munged, slurmctld, slurmd) on loopback, for tests.

Everything lives in a short temp dir under /tmp (Unix socket paths are limited to 107 bytes):
its own munge key and munged, a slurm.conf naming that munged's socket, the daemons' state,
spool, pid and log files. The daemons run in the foreground as our children and are stopped by
their pids; a job's processes are found by the ``SLURM_CONF`` in their environment (the
daemons' and every job submitted with ``cluster.env`` carry this cluster's), so only this
cluster's processes are ever killed. Tests run it inside their own network namespace
(tests/netns.py), where whatever survives dies with the namespace anyway.

Slurm is installed with apt when missing (root only, once per machine under a file lock):
``unavailable()`` says why it cannot be, and the fixture skips with that reason, or fails
where ``NORMLAB_REQUIRE_SLURM`` is set (.ci/run sets it).
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

REQUIRE = "NORMLAB_REQUIRE_SLURM"
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scancel", "sinfo", "scontrol")
PARTITION = "normlab"
NODE = "nl1"
ENDED = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
         "BOOT_FAIL", "DEADLINE"}  # squeue's names of the states a job ends in
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")  # daemons live there; a user's PATH may lack it
_LOCK = "/tmp/normlab-slurm-install.lock"  # machine-wide: every pytest worker, every run
_APT = ("apt-get", "-q", "-y", "-o", "DPkg::Lock::Timeout=600")  # wait out another apt, don't fail on it


def which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN))


def _missing() -> list[str]:
    return [n for n in DAEMONS + CLIENTS if which(n) is None]


@functools.cache
def unavailable() -> str | None:
    """Why this machine cannot run a Slurm cluster (None: it can), installing Slurm if root can."""
    if not _missing():
        return None
    if os.geteuid() != 0:
        return f"Slurm is not installed (no {', '.join(_missing())}) and installing it needs root"
    if which("apt-get") is None:
        return f"Slurm is not installed (no {', '.join(_missing())}) and there is no apt-get to install it"
    from filelock import FileLock

    with FileLock(_LOCK):  # parallel pytest workers: one runs apt, the others find it done
        if not _missing():
            return None
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for args in (["update"], ["install", "slurm-wlm", "munge"]):
            try:
                r = subprocess.run([*_APT, *args], env=env, capture_output=True, text=True, timeout=1200)
            except subprocess.TimeoutExpired:
                return f"apt-get {args[0]} ran past 1200 s"
            if r.returncode != 0:
                return f"apt-get {' '.join(args)} failed ({r.returncode}): {(r.stdout + r.stderr)[-1500:]}"
    missing = _missing()
    return f"apt-get installed slurm-wlm and munge, yet {', '.join(missing)} are missing" if missing else None


def add_loopback_address() -> None:
    """Give a test's network namespace (only lo, 127.0.0.1) a second loopback address.

    slurmctld and slurmd bind their ports through getaddrinfo(AI_ADDRCONFIG), which finds no
    address when 127.0.0.1 is the only IPv4 one configured (glibc does not count it), and they
    exit. 127.0.0.2 on lo counts, and still reaches nothing outside the namespace."""
    shown = subprocess.run(["ip", "-o", "addr", "show", "dev", "lo"], capture_output=True, text=True, check=True)
    if " 127.0.0.2/" not in shown.stdout:
        subprocess.run(["ip", "addr", "add", "127.0.0.2/32", "dev", "lo"], capture_output=True, check=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 1024


def _conf(d: Path, sock: Path, host: str, user: str, cpus: int) -> str:
    ports = f"SlurmctldPort={free_port()}\nSlurmdPort={free_port()}\n"
    # Real memory is checked against jobs' --mem (submitit sets it), CR_CPU does not consume it;
    # config_overrides: a count the node's hardware disagrees with does not drain it.
    return f"""ClusterName=normlab
SlurmctldHost={host}(127.0.0.1)
{ports}SlurmUser={user}
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
PropagateResourceLimits=NONE
ReturnToService=2
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
KillWait=5
MinJobAge=30
InactiveLimit=0
SlurmdTimeout=60
NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={cpus} RealMemory={max(1, _memory_mb() * 9 // 10)} State=UNKNOWN
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""


class SlurmCluster:
    """``with SlurmCluster() as c: c.run(["sbatch", "--wrap", "true"])``: munged, slurmctld and
    slurmd started, the node idle. ``env`` runs Slurm commands against it (and is what jobs
    should be submitted with), ``partition`` is its one partition, ``dir`` its temp dir."""

    partition = PARTITION
    node = NODE

    def __init__(self, cpus: int | None = None) -> None:
        self.cpus = cpus or len(os.sched_getaffinity(0))
        self.procs: dict[str, subprocess.Popen] = {}
        self.dir = Path(tempfile.mkdtemp(prefix="nls", dir="/tmp"))  # not $TMPDIR: that may be long
        self.dir.chmod(0o711)  # munge clients need to reach the socket in it
        self.conf = self.dir / "slurm.conf"
        self.sock = self.dir / "munge.sock"
        path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
        self.env = {**os.environ, "PATH": path, "SLURM_CONF": str(self.conf)}
        for var in [v for v in self.env if v.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))]:
            if var != "SLURM_CONF":  # a test run inside a Slurm job must not leak that job's settings
                del self.env[var]

    def start(self, timeout: float = 90) -> None:
        d = self.dir
        (d / "state").mkdir()
        (d / "spool" / NODE).mkdir(parents=True)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._daemon("munged", [which("munged"), "--foreground", "--force", f"--socket={self.sock}",
                                f"--key-file={key}", f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
                                f"--seed-file={d}/munged.seed", "--num-threads=2"])
        self.wait_for(lambda: self.sock.exists(), timeout, "munged did not create its socket")
        host = socket.gethostname().split(".")[0]  # slurmctld runs only where its host name matches
        self.conf.write_text(_conf(d, self.sock, host, pwd.getpwuid(os.geteuid()).pw_name, self.cpus))
        self._daemon("slurmctld", [which("slurmctld"), "-D", "-f", str(self.conf)])
        self._daemon("slurmd", [which("slurmd"), "-D", "-N", NODE, "-f", str(self.conf)])
        self.wait_for(self._idle, timeout, f"node {NODE} not idle in sinfo")

    def run(self, cmd: list[str] | str, check: bool = True, timeout: float = 60,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
        """Run a command (a list, or a shell line) against this cluster, in ``cwd`` (default: the
        cluster's dir, where sbatch puts a job's default output); output captured as text."""
        r = subprocess.run(cmd, shell=isinstance(cmd, str), env=self.env, cwd=cwd or self.dir, capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{cmd} exited {r.returncode}: {r.stdout[-1000:]}{r.stderr[-2000:]}\n{self.logs()}")
        return r

    def submit(self, *args: str) -> int:
        """``sbatch --parsable ARGS``; returns the job id."""
        return int(self.run(["sbatch", "--parsable", *args]).stdout.strip().split(";")[0])

    def states(self, job: int | str) -> list[str]:
        """States of the job (an array: of each task) that slurmctld still holds (MinJobAge after its end)."""
        return self.run(["squeue", "-h", "-t", "all", "-j", str(job), "-o", "%T"], check=False).stdout.split()

    def wait(self, job: int | str, timeout: float = 60) -> list[str]:
        """Wait until the job (each task of an array) has ended; returns the end states."""
        self.wait_for(lambda: all(s in ENDED for s in self.states(job)), timeout, f"job {job} did not end")
        return self.states(job)

    def logs(self, chars: int = 3000) -> str:
        """The tails of what the daemons wrote (for error messages)."""
        parts = []
        for name in ("munged", "slurmctld", "slurmd"):
            out = self.dir / f"{name}.out"  # in the foreground a daemon logs to stderr too, and from its start
            text = out.read_text(errors="replace") if out.exists() else ""
            parts.append(f"--- {name} ({self.dir}) ---\n{text[-chars:]}")
        return "\n".join(parts)

    def _daemon(self, name: str, args: list[str | None]) -> None:
        with open(self.dir / f"{name}.out", "w") as fh:  # what a daemon prints before its log file opens
            self.procs[name] = subprocess.Popen([str(a) for a in args], env=self.env, stdout=fh,
                                                stderr=subprocess.STDOUT, start_new_session=True)

    def _idle(self) -> bool:
        r = self.run(["sinfo", "-h", "-N", "-n", NODE, "-o", "%T"], check=False)
        return r.returncode == 0 and r.stdout.strip() == "idle"

    def wait_for(self, done, timeout: float, what: str) -> None:
        deadline = time.time() + timeout
        while not done():
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead or time.time() > deadline:
                why = f"{', '.join(dead)} exited" if dead else f"{timeout:g} s passed"
                raise RuntimeError(f"Slurm cluster in {self.dir}: {what} ({why})\n{self.logs()}")
            time.sleep(0.2)

    def pids(self) -> list[int]:
        """Pids of live processes (jobs, slurmstepd) whose environment names this cluster's conf."""
        mark = f"SLURM_CONF={self.conf}".encode()
        pids = []
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) != os.getpid():
                try:
                    if mark in Path(f"/proc/{p}/environ").read_bytes().split(b"\0"):
                        pids.append(int(p))
                except OSError:
                    continue
        return pids

    def clean(self, timeout: float = 30) -> None:
        """Between tests: cancel every job, wait for the queue to empty, and bring the node back
        into service (a test may have drained it)."""
        self.run(["scancel", "-p", PARTITION], check=False)
        self.wait_for(lambda: not self.run(["squeue", "-h"], check=False).stdout.strip(), timeout,
                      "jobs still queued after scancel")
        state = self.run(["sinfo", "-h", "-N", "-n", NODE, "-o", "%T"], check=False).stdout.strip()
        if state != "idle":
            self.run(["scontrol", "update", f"nodename={NODE}", "state=resume"], check=False)
            self.wait_for(self._idle, timeout, f"node {NODE} not idle again")

    def stop(self) -> None:
        """Cancel every job, stop the daemons (SIGTERM, then SIGKILL), kill what is left of ours."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            self.run(["scancel", "-p", PARTITION], check=False)
            try:
                self.wait_for(lambda: not self.run(["squeue", "-h"], check=False).stdout.strip(), 15, "")
            except RuntimeError:
                pass  # killed below
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=20)
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "SlurmCluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
