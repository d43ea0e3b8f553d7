"""Issue 37: a cluster started as the README says (`ray start --head`, token authentication on) is joined with the
token where Ray keeps it, and refuses a driver without one in one line, not Ray's log lines. The cluster is this
test's own (its own HOME, port and temp folder), stopped by stopping its processes alone: never `ray stop`."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import PROJECT, free_port

TOKEN = "f" * 32


@pytest.fixture(scope="module")
def token_cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("head-home")
    port = free_port()
    env = {**os.environ, "HOME": str(home), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}
    # Ray's sockets live under its temp folder, and a socket's path has at most 107 bytes: pytest's folder for an xdist
    # worker (…/popen-gw0/…) is too deep for them.
    temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    head = subprocess.Popen([str(PROJECT / ".venv" / "bin" / "ray") if (PROJECT / ".venv" / "bin" / "ray").exists()
                             else os.path.join(os.path.dirname(sys.executable), "ray"),
                             "start", "--head", "--block", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                             f"--temp-dir={temp}"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 120
    while True:
        assert head.poll() is None and time.time() < deadline, "the test's Ray head did not start"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.5)
    yield f"127.0.0.1:{port}"
    os.killpg(head.pid, signal.SIGKILL)
    for process in psutil.process_iter(["cmdline"]):  # its raylet and GCS, found by this test's own folder
        if any(str(temp) in part for part in process.info["cmdline"] or []):
            process.kill()
    shutil.rmtree(temp, ignore_errors=True)


def driver_env(home, **extra) -> dict:
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    return {**env, "HOME": str(home), **extra}


def test_a_token_cluster_is_joined_with_the_token_where_ray_keeps_it(token_cluster, tmp_path):
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text(TOKEN)
    joined = subprocess.run(
        [sys.executable, "-c", "import ray; from fwsapp.orchestration.distributed import connect; "
                               f"connect({token_cluster!r}); print('CPU', ray.cluster_resources()['CPU'])"],
        cwd=PROJECT, env=driver_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert joined.returncode == 0 and "CPU 1.0" in joined.stdout, joined.stderr


def test_without_a_token_the_grid_says_what_to_set_in_one_line(token_cluster, tmp_path):
    refused = subprocess.run(
        [sys.executable, "-m", "fwsapp", "grid", str(PROJECT / "experiments" / "demo.toml"), "--ray", token_cluster,
         "--db", str(tmp_path / "grid.duckdb")],
        cwd=PROJECT, env=driver_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"error: The Ray cluster at {token_cluster} needs token authentication: put its token in ~/.ray/auth_token or "
        "RAY_AUTH_TOKEN (`ray get-auth-token` on its head node prints it), and run again."], refused.stderr


def test_an_address_where_nothing_listens_fails_at_once_in_one_line(tmp_path):
    """Issue 38: `grid --ray 127.0.0.1:1` hung past 300 s, printing Ray's retry lines."""
    started = time.time()
    refused = subprocess.run(
        [sys.executable, "-m", "fwsapp", "grid", str(PROJECT / "experiments" / "demo.toml"), "--ray", "127.0.0.1:1",
         "--db", str(tmp_path / "grid.duckdb")],
        cwd=PROJECT, env=driver_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and time.time() - started < 60
    assert refused.stderr.strip().splitlines() == [
        "error: Nothing answers at 127.0.0.1:1 (connection refused within 30 s): start the cluster there (`ray start "
        "--head`), or check the address."], refused.stderr
