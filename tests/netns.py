"""Tests that start Ray run in namespaces of their own, with loopback as the only network.

A test marked ``@pytest.mark.netns`` does not run in the pytest process: the hook in
conftest.py runs it again (same node id, a fresh pytest, together with the other netns tests of
its module) under ``unshare`` in new network, PID and mount namespaces with only ``lo`` up. No Ray traffic can leave loopback (Ray then
reports node IP 127.0.0.1), ports cannot clash with anything else on the machine, and a
process the test failed to stop dies with the namespace when the inner pytest exits.

Ray's temp dirs live under the test's ``tmp_path`` (``RAY_TMPDIR``), reached through a
short symlink in /tmp because Unix socket paths are limited to 107 bytes. Ray's token
authentication is off inside (``RAY_AUTH_MODE=disabled``) unless a test turns it on.
"""

from __future__ import annotations

import functools
import os
import re
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


# node id -> (outcome, message) of a netns test that already ran inside, in its module's group
_DONE: dict[str, tuple[str, str]] = {}


def run_inside(item: pytest.Function, timeout: float) -> None:
    """Run ``item`` inside new namespaces; pass, skip or fail as it did there.

    The netns tests of one module run together, in one fresh pytest in one set of namespaces,
    when the first of them comes up: a cluster a module's tests share (a class-scoped fixture)
    is started once, not once a test. Each test then reports its own outcome from there."""
    reason = unavailable()
    if reason:
        if os.environ.get(REQUIRE):
            pytest.fail(reason)
        pytest.skip(reason)
    if item.nodeid not in _DONE:
        group = [i for i in item.session.items if i.get_closest_marker("netns") is not None
                 and i.path == item.path and i.nodeid not in _DONE]
        total = sum(float(i.get_closest_marker("netns").kwargs.get("timeout", 600)) for i in group)
        _run_group(item, [i.nodeid for i in group], max(timeout, total))
    outcome, message = _DONE.pop(item.nodeid)
    if outcome == "failed":
        pytest.fail(message, pytrace=False)
    if outcome == "skipped":
        pytest.skip(message)


def _run_group(item: pytest.Function, nodeids: list[str], timeout: float) -> None:
    tmp_path: Path = item.funcargs["tmp_path"]
    (tmp_path / "ray").mkdir()
    link = Path(tempfile.mkdtemp(prefix="nl", dir="/tmp"))
    (link / "r").symlink_to(tmp_path / "ray")
    report = tmp_path / "inner.xml"
    env = {**os.environ, INSIDE: "1", "RAY_TMPDIR": str(link / "r"), "RAY_AUTH_MODE": "disabled",
           "RAY_USAGE_STATS_ENABLED": "0", "TMPDIR": str(tmp_path),
           "RAY_agent_register_timeout_ms": "300000"}  # a loaded machine starts agents slowly
    cmd = unshare_cmd() + ["sh", "-c", _ENTER, "sh", sys.executable, "-m", "pytest", *map(_bare, nodeids),
                           "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'inner'}", f"--junitxml={report}"]
    output = ""
    try:
        proc = subprocess.run(cmd, cwd=item.config.rootpath, env=env, capture_output=True, text=True,
                              timeout=timeout)
        output = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        output = f"ran past {timeout:g} s in its namespace; its output:\n{out[-6000:]}"
    finally:
        shutil.rmtree(link, ignore_errors=True)  # the symlink only; Ray's files stay in tmp_path
    cases = {c.get("name"): c for c in ET.parse(report).getroot().iter("testcase")} if report.is_file() else {}
    for nodeid in nodeids:
        _DONE[nodeid] = _outcome(cases.get(_bare(nodeid).rpartition("::")[2]), output)


def _bare(nodeid: str) -> str:
    """The node id without the ``@group`` pytest-xdist appends under ``--dist loadgroup``."""
    return re.sub(r"@[\w-]+$", "", nodeid)


def _outcome(case: ET.Element | None, output: str) -> tuple[str, str]:
    if case is None:
        return "failed", f"the test did not run in its namespace; output:\n{output[-6000:]}"
    for tag in ("failure", "error"):
        bad = case.find(tag)
        if bad is not None:
            return "failed", (f"in its network namespace: {bad.get('message')}\n{bad.text or ''}\n"
                              f"--- output ---\n{output[-4000:]}")
    skipped = case.find("skipped")
    if skipped is not None:
        return "skipped", f"in its network namespace: {skipped.get('message')}"
    return "passed", ""
