"""Tests that start Ray run in namespaces of their own, with loopback as the only network.

A test marked ``@pytest.mark.netns`` does not run in the pytest process: the hook in
conftest.py runs it again (same node id, a fresh pytest) under ``unshare`` in new network,
PID and mount namespaces with only ``lo`` up. No Ray traffic can leave loopback (Ray then
reports node IP 127.0.0.1), ports cannot clash with anything else on the machine, and a
process the test failed to stop dies with the namespace when the inner pytest exits.

Ray's temp dirs live under the test's ``tmp_path`` (``RAY_TMPDIR``), reached through a
short symlink in /tmp because Unix socket paths are limited to 107 bytes. Ray's token
authentication is off inside (``RAY_AUTH_MODE=disabled``) unless a test turns it on.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

INSIDE = "NORMLAB_TEST_NETNS"      # set in the inner pytest: run the test body there
REQUIRE = "NORMLAB_REQUIRE_NETNS"  # set by .ci/run: no namespaces is a failure, not a skip
_ENTER = 'ip link set lo up && exec "$@"'


def unshare_cmd() -> list[str]:
    """New network, PID and mount namespaces; as a normal user, in a user namespace too."""
    cmd = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
    return cmd if os.geteuid() == 0 else cmd[:1] + ["--map-root-user"] + cmd[1:]


@functools.cache
def unavailable() -> str | None:
    """Why this machine cannot give a test its own network namespace (None: it can)."""
    if not sys.platform.startswith("linux") or not shutil.which("unshare") or not shutil.which("ip"):
        return "Ray tests need Linux with unshare (util-linux) and ip (iproute2)"
    r = subprocess.run(unshare_cmd() + ["sh", "-c", _ENTER, "sh", "true"], capture_output=True, text=True,
                       timeout=60)
    return None if r.returncode == 0 else f"cannot create a network namespace: {r.stderr.strip()[-300:]}"


def run_inside(item: pytest.Function, timeout: float) -> None:
    """Run ``item`` in a fresh pytest inside new namespaces; pass, skip or fail as it did."""
    reason = unavailable()
    if reason:
        if os.environ.get(REQUIRE):
            pytest.fail(reason)
        pytest.skip(reason)
    tmp_path: Path = item.funcargs["tmp_path"]
    (tmp_path / "ray").mkdir()
    link = Path(tempfile.mkdtemp(prefix="nl", dir="/tmp"))
    (link / "r").symlink_to(tmp_path / "ray")
    report = tmp_path / "inner.xml"
    env = {**os.environ, INSIDE: "1", "RAY_TMPDIR": str(link / "r"), "RAY_AUTH_MODE": "disabled",
           "RAY_USAGE_STATS_ENABLED": "0", "TMPDIR": str(tmp_path),
           "RAY_agent_register_timeout_ms": "300000"}  # a loaded machine starts agents slowly
    cmd = unshare_cmd() + ["sh", "-c", _ENTER, "sh", sys.executable, "-m", "pytest", item.nodeid,
                           "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'inner'}", f"--junitxml={report}"]
    try:
        proc = subprocess.run(cmd, cwd=item.config.rootpath, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"ran past {timeout:g} s in its namespace; its output:\n{out[-6000:]}", pytrace=False)
    finally:
        shutil.rmtree(link, ignore_errors=True)  # the symlink only; Ray's files stay in tmp_path
    _outcome(report, proc.stdout + proc.stderr)


def _outcome(report: Path, output: str) -> None:
    cases = ET.parse(report).getroot().iter("testcase") if report.is_file() else iter(())
    case = next(cases, None)
    if case is None:
        pytest.fail(f"the test did not run in its namespace; output:\n{output[-6000:]}", pytrace=False)
    for tag in ("failure", "error"):
        bad = case.find(tag)
        if bad is not None:
            pytest.fail(f"in its network namespace: {bad.get('message')}\n{bad.text or ''}\n"
                        f"--- output ---\n{output[-4000:]}", pytrace=False)
    skipped = case.find("skipped")
    if skipped is not None:
        pytest.skip(f"in its network namespace: {skipped.get('message')}")
