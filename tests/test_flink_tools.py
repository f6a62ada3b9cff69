"""The Flink tooling without Java: job server routes, sdist names, cluster config, error hint."""

from __future__ import annotations

import http.server
import threading

import pytest

import flink_support
from domain.errors import NotariusError
from runners import errors as runner_errors

fjs = flink_support._fetch
cluster_mod = flink_support._cluster

# Beam's error from a real run of the fixture archive on a session cluster with 64mb of network memory and
# Flink's default sort-shuffle.min-buffers (512), as reprocess.run caught it.
FLINK_NETWORK_ERROR = (
    "Pipeline BeamApp-root-1203073412-14b2eb4b_a3c69ff1-7d34-40ee-9def-2dfbb4d4ea23 failed in state FAILED: "
    "java.io.IOException: Insufficient number of network buffers: required 512, but only 502 available. The total "
    "number of network buffers is currently set to 2048 of 32768 bytes each. You can increase this number by "
    "setting the configuration keys 'taskmanager.memory.network.fraction', 'taskmanager.memory.network.min', and "
    "'taskmanager.memory.network.max'."
)


def test_network_buffer_failure_names_the_flink_settings():
    hint = runner_errors.explain(RuntimeError(FLINK_NETWORK_ERROR))
    assert hint is not None
    for setting in ("taskmanager.memory.network.min", "taskmanager.memory.network.max",
                    "taskmanager.network.sort-shuffle.min-buffers"):
        assert setting in hint
    assert "512" in hint and "502" in hint


def test_other_failures_get_no_hint():
    assert runner_errors.explain(RuntimeError("java.lang.OutOfMemoryError: Java heap space")) is None


def test_session_cluster_config_has_the_network_settings(tmp_path):
    cluster_mod._write_conf(tmp_path / "conf", tmp_path, 8081, 6123, 2, "1024m", "1536m")
    conf = (tmp_path / "conf" / "config.yaml").read_text()
    assert 'taskmanager.memory.network.min: "512mb"' in conf
    assert 'taskmanager.memory.network.max: "512mb"' in conf
    assert "taskmanager.network.sort-shuffle.min-buffers: 64" in conf
    assert 'taskmanager.memory.task.off-heap.size: "256m"' in conf
    assert 'rest.bind-address: "localhost"' in conf
    # An OOM in a TaskManager thread must fail the job, not hang it (Flink's default only logs it).
    assert 'cluster.uncaught-exception-handling: "FAIL"' in conf
    assert "taskmanager.jvm-exit-on-oom: true" in conf


def test_session_cluster_cli_sizes_the_taskmanager(monkeypatch):
    seen = {}

    def start_cluster(*args, **kwargs):
        seen.update(kwargs)
        raise cluster_mod.ClusterError("not started in this test")

    monkeypatch.setattr(cluster_mod, "start_cluster", start_cluster)
    assert cluster_mod.main(["start", "--taskmanager-memory", "6g"]) == 1
    assert seen["taskmanager_memory"] == "6g"


@pytest.mark.parametrize("name", ["apache-flink-libraries-1.19.3.tar.gz", "apache_flink_libraries-1.20.5.tar.gz"])
def test_flink_libraries_sdist_found_under_either_name(tmp_path, name):
    (tmp_path / name).write_bytes(b"")
    (tmp_path / "apache_flink-1.20.5.tar.gz").write_bytes(b"")  # PyFlink itself, not the libraries
    assert [p.name for p in cluster_mod.find_sdists(tmp_path)] == [name]


def test_one_flink_line_for_job_server_and_cluster(monkeypatch):
    monkeypatch.delenv(fjs.FLINK_VERSION_ENV, raising=False)
    assert fjs.resolve_flink_version() == "1.20" == cluster_mod.resolve_flink_version()
    assert cluster_mod.patch_release("1.20").startswith("1.20.")
    assert "1.20" in fjs.VENDOR_FLINK_LINES


def test_vendor_dir_found_beside_a_parent_of_the_repository(monkeypatch, tmp_path):
    vendor = tmp_path / "shared" / "vendor" / "beam-flink-job-server"
    vendor.mkdir(parents=True)
    (vendor / "pom.xml").write_text("<project><properties><beam.version>2.73.0</beam.version></properties></project>")
    monkeypatch.delenv(fjs.VENDOR_DIR_ENV, raising=False)
    monkeypatch.setattr(fjs, "REPO_ROOT", tmp_path / "wt" / "flink")  # a worktree one level deeper
    assert fjs.vendor_dir() == vendor
    assert fjs.vendor_beam_version(vendor) == "2.73.0"
    monkeypatch.setenv(fjs.VENDOR_DIR_ENV, str(tmp_path / "nowhere"))
    assert fjs.vendor_dir() is None


class _NotFound(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_HEAD(self):  # noqa: N802
        _NotFound.requests.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_release_lookup_is_one_head_request(monkeypatch):
    server = http.server.HTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv(fjs.MAVEN_REPO_ENV, f"http://127.0.0.1:{server.server_port}/maven2")
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        assert fjs.release_served("1.20") is False
    finally:
        server.shutdown()
    assert _NotFound.requests == [
        f"/maven2/org/apache/beam/beam-runners-flink-1.20-job-server/{fjs.beam_version()}/"
        f"beam-runners-flink-1.20-job-server-{fjs.beam_version()}.jar"]


def test_cached_vendored_build_is_reused_without_maven(monkeypatch, tmp_path):
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "pom.xml").write_text("<project><properties><beam.version>2.73.0</beam.version></properties></project>")
    monkeypatch.setenv(fjs.VENDOR_DIR_ENV, str(vendor))
    monkeypatch.delenv(fjs.JOB_SERVER_JAR_ENV, raising=False)
    monkeypatch.setattr(fjs, "CACHE_ROOT", tmp_path / "cache")
    built = tmp_path / "cache" / "job-server" / "beam-runners-flink-1.20-job-server-2.73.0.jar"
    built.parent.mkdir(parents=True)
    built.write_bytes(b"jar")
    monkeypatch.setattr(fjs.shutil, "which", lambda name: pytest.fail(f"looked for {name}"))
    jar, route = fjs.obtain("1.20", cache_dir=tmp_path / "beam-cache")
    assert jar == built and "vendored" in route


def test_no_route_without_release_or_vendored_sources_is_unavailable(monkeypatch, tmp_path):
    monkeypatch.setenv(fjs.VENDOR_DIR_ENV, str(tmp_path / "nowhere"))
    monkeypatch.delenv(fjs.JOB_SERVER_JAR_ENV, raising=False)
    monkeypatch.setattr(fjs, "find_java", lambda: "/usr/bin/java")
    monkeypatch.setattr(fjs, "release_served", lambda version: False)
    with pytest.raises(fjs.FetchError) as raised:
        fjs.obtain("1.20", cache_dir=tmp_path / "beam-cache")
    assert raised.value.unavailable and "vendored" in str(raised.value)


def _run_failing_with(monkeypatch, tmp_path, error: Exception):
    from fixture_archive import write_archive
    from pipelines import reprocess

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(reprocess, "build_pipeline", fail)
    archive = write_archive(tmp_path / "archive")
    reprocess.run(["--transcripts", archive["transcripts"], "--candidates", archive["candidates"],
                   "--output", str(tmp_path / "out")])


def test_job_fails_naming_the_setting_when_flink_lacks_network_buffers(monkeypatch, tmp_path):
    with pytest.raises(NotariusError, match="taskmanager.memory.network.min") as raised:
        _run_failing_with(monkeypatch, tmp_path, RuntimeError(FLINK_NETWORK_ERROR))
    assert "Insufficient number of network buffers" in str(raised.value)  # Flink's own words kept
    assert raised.value.line("notarius-reprocess") == str(raised.value)  # said as it is, as before


def test_job_reraises_other_runner_failures_unchanged(monkeypatch, tmp_path):
    with pytest.raises(RuntimeError, match="something else"):
        _run_failing_with(monkeypatch, tmp_path, RuntimeError("something else"))
