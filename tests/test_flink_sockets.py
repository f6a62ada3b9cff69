"""Every socket the Flink launch of docs/running.md opens listens on loopback only.

``make flink-up`` starts a JobManager, a TaskManager, a Python worker pool and a kept Beam job server
(scripts/flink/session_cluster.py). Their listening sockets are read from /proc/net/tcp and tcp6 for
the process tree of each; one on any other address fails the test. Beam's own server factory listened
on every interface (the job server's job and artifact ports, a TaskManager's Fn API servers during a
job: test_flink.py watches those); scripts/flink/loopback_beam.py puts a copy that binds to its
address first on their classpath.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import flink_support
from flink_support import ClusterError, flink_home, free_port, listening_sockets

ROOT = Path(__file__).resolve().parent.parent
SESSION_CLUSTER = ROOT / "scripts" / "flink" / "session_cluster.py"
loopback = flink_support._load("loopback_beam")


@pytest.mark.parametrize("column, address", [
    ("0100007F", "127.0.0.1"),
    ("00000000", "0.0.0.0"),
    ("0000000000000000FFFF00000100007F", "::ffff:127.0.0.1"),
    ("00000000000000000000000001000000", "::1"),
    ("00000000000000000000000000000000", "::"),
])
def test_kernel_addresses_are_read_in_host_order(column, address):
    assert flink_support._kernel_address(column) == ipaddress.ip_address(address)


@pytest.mark.parametrize("address, loopback_only", [
    ("127.0.0.1", True), ("::1", True), ("::ffff:127.0.0.1", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.4", False), ("::ffff:10.0.0.1", False),
])
def test_loopback_is_what_only_this_machine_reaches(address, loopback_only):
    assert flink_support.ListeningSocket(1, ipaddress.ip_address(address), 80, "x").loopback is loopback_only


def test_a_socket_on_every_interface_is_seen(tmp_path):
    """The check can fail: a child process listening on all interfaces shows in its parent's tree."""
    child = subprocess.Popen([sys.executable, "-c", "import socket, sys, time\n"
                              "s = socket.socket(socket.AF_INET6); s.bind(('::', 0)); s.listen()\n"
                              "print(s.getsockname()[1], flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        wide = [s for s in listening_sockets([child.pid]) if not s.loopback]
        assert [(s.pid, s.port) for s in wide] == [(child.pid, port)]
    finally:
        child.kill()
        child.wait()


def test_the_server_factory_copy_builds_servers_from_the_whole_address(flink_jar, tmp_path):
    jar = loopback.loopback_jar(flink_jar, tmp_path)
    assert jar is not None, "Beam's class already binds to its address: loopback_beam.py is no longer needed"
    with zipfile.ZipFile(jar) as archive:
        assert archive.namelist() == [f"{loopback.FACTORY_CLASS}.class"]
        patched = archive.read(f"{loopback.FACTORY_CLASS}.class")
    assert loopback.bind_to_given_address(patched) is None  # nothing left to change
    assert loopback.loopback_jar(flink_jar, tmp_path) == jar  # the same class, the same jar
    with zipfile.ZipFile(flink_jar) as archive:
        original = archive.read(f"{loopback.FACTORY_CLASS}.class")
    assert len(patched) > len(original)
    with pytest.raises(loopback.LoopbackPatchError, match="not a Java class file"):
        loopback.bind_to_given_address(b"PK" + original[2:])


def test_a_jar_without_beams_server_factory_is_refused_in_one_line(tmp_path):
    jar = tmp_path / "other.jar"
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nMain-Class: a.B\n")
    with pytest.raises(ClusterError, match="cannot keep Beam's gRPC servers on localhost with .*other.jar"):
        flink_support._cluster.loopback_jar(str(jar))


def test_the_job_server_runs_as_java_jar_would(tmp_path):
    """``-cp`` instead of ``-jar``: the manifest's main class and module options become arguments."""
    jar = tmp_path / "server.jar"
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nMain-Class: org.example.Main\r\n"
                         "Add-Exports: java.base/sun.net.util java.rmi/sun.rmi.reg\r\n istry\r\n"
                         "Add-Opens: java.base/java.lang\r\n\r\nName: other/\r\nMain-Class: no.Such\r\n")
    first = tmp_path / "first.jar"
    assert loopback.jar_command(jar, first) == [
        "--add-exports=java.base/sun.net.util=ALL-UNNAMED", "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
        "--add-opens=java.base/java.lang=ALL-UNNAMED", "-cp", f"{first}:{jar.resolve()}", "org.example.Main"]


@pytest.mark.flink_e2e
@pytest.mark.timeout(300)
def test_flink_up_listens_on_loopback_only(flink_jar):
    """The launch of ``make flink-up`` (its flags, free ports): every socket of its four process trees
    is on loopback, and each tree listens where the launch says it does."""
    try:
        flink_home()
    except ClusterError as e:
        pytest.fail(f"Flink runtime jars unavailable: {e}")
    rest, pool, job = free_port(), free_port(), free_port()
    cli = [sys.executable, str(SESSION_CLUSTER), "--rest-port", str(rest)]
    started = subprocess.run([*cli, "start", "--worker-pool-port", str(pool), "--job-server-port", str(job),
                              "--taskmanagers", "1"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        state = json.loads(flink_support._cluster._state_file(rest).read_text())
        trees = {"JobManager": state["jobmanager_pid"], "TaskManager": state["taskmanager_pids"][0],
                 "worker pool": state["worker_pool_pid"], "job server": state["job_server_pid"]}
        listening = {name: listening_sockets([pid]) for name, pid in trees.items()}
        wide = [str(s) for sockets in listening.values() for s in sockets if not s.loopback]
        assert wide == [], "listening beyond loopback:\n" + "\n".join(wide)
        assert all(listening.values()), {name: len(sockets) for name, sockets in listening.items()}
        ports = {name: {s.port for s in sockets} for name, sockets in listening.items()}
        assert rest in ports["JobManager"] and pool in ports["worker pool"] and job in ports["job server"], ports
        # The job server's artifact staging service too (a free port): the same Beam factory a
        # TaskManager's Fn API servers come from.
        assert len(ports["job server"]) == 2, ports
    finally:
        subprocess.run([*cli, "stop"], cwd=ROOT, capture_output=True, timeout=120)
