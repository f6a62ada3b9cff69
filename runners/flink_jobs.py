"""A Flink job that outlives the command that submitted it: found and cancelled before the command ends.

With ``--runner=FlinkRunner --flink_master=HOST:PORT`` the command talks to Beam's job server, which
submits the job to the Flink cluster and then only watches it. When the command stops before the job
ends (the job server died, Ctrl-C, SIGTERM, an error while waiting), the Flink job runs on: it can go
on writing into the output folder after the command has removed its temporary files and released the
folder's lock, and even commit a run there later (docs/running.md, "When the job server or the
JobManager dies"). So the command cancels it first, through Flink's REST API
(``PATCH /jobs/<id>?mode=cancel``), waits until Flink says the job is over, and says so on stderr.

The job is found by its name: the command names it (``--job_name``, ``notarius-<random>`` unless the
operator chose one) and notes the cluster's jobs before submitting, so an older job of the same name
is never touched. ``[local]`` needs none of this: its cluster lives in the job server and dies with it.

Standard library only, apart from reading Beam's options.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Iterator

# Masters that run the job inside the job server's JVM (nothing outlives it).
EMBEDDED_MASTERS = frozenset({"", "[local]", "[auto]", "[collection]"})
TERMINAL_STATES = frozenset({"FINISHED", "FAILED", "CANCELED"})
REST_TIMEOUT_S = 5.0
CANCEL_WAIT_S = 30.0
POLL_S = 0.5


@dataclass(frozen=True)
class FlinkTarget:
    """The cluster a run was submitted to, the job's name, and the jobs the cluster had before it."""

    rest_url: str
    job_name: str
    earlier_jobs: frozenset[str]


def rest_url(flink_master: str | None) -> str | None:
    """Flink's REST address for ``--flink_master``, or None when the cluster is embedded in the job server."""
    master = (flink_master or "").strip()
    if master in EMBEDDED_MASTERS:
        return None
    if "://" not in master:
        master = f"http://{master}"
    return master.rstrip("/")


def _request(url: str, method: str = "GET") -> dict:
    request = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(request, timeout=REST_TIMEOUT_S) as response:
        body = response.read()
    return json.loads(body) if body else {}


def job_ids(rest: str) -> frozenset[str]:
    return frozenset(job["id"] for job in _request(f"{rest}/jobs").get("jobs", []))


def jobs_left_running(target: FlinkTarget) -> list[dict]:
    """The cluster's jobs named like ours, started since we submitted, and not over."""
    jobs = _request(f"{target.rest_url}/jobs/overview").get("jobs", [])
    return [job for job in jobs if job.get("name") == target.job_name and job["jid"] not in target.earlier_jobs
            and job.get("state") not in TERMINAL_STATES]


def cancel_job(rest: str, jid: str, wait_s: float = CANCEL_WAIT_S) -> str:
    """Ask Flink to cancel ``jid`` and wait until it is over; its final state, or its state at the deadline."""
    _request(f"{rest}/jobs/{jid}?mode=cancel", method="PATCH")
    deadline = time.monotonic() + wait_s
    while True:
        state = _request(f"{rest}/jobs/{jid}").get("state", "UNKNOWN")
        if state in TERMINAL_STATES or time.monotonic() >= deadline:
            return state
        time.sleep(POLL_S)


def prepare(options) -> FlinkTarget | None:
    """Name the job and note the cluster's jobs, for a FlinkRunner run on a cluster; None otherwise.

    A cluster whose REST API does not answer is left to the submission to report."""
    from apache_beam.options.pipeline_options import FlinkRunnerOptions, GoogleCloudOptions, StandardOptions

    runner = (options.view_as(StandardOptions).runner or "").rsplit(".", 1)[-1]
    if runner != "FlinkRunner":
        return None
    rest = rest_url(options.view_as(FlinkRunnerOptions).flink_master)
    if rest is None:
        return None
    naming = options.view_as(GoogleCloudOptions)
    if not naming.job_name:
        naming.job_name = f"notarius-{uuid.uuid4().hex[:16]}"
    try:
        earlier = job_ids(rest)
    except (OSError, ValueError):
        return None
    return FlinkTarget(rest, naming.job_name, earlier)


def cancel_left_jobs(target: FlinkTarget, prog: str, folder: str) -> None:
    """Cancel every job of ``target`` still running; one line on stderr for each, saying what became of it."""
    try:
        running = jobs_left_running(target)
    except (OSError, ValueError) as exc:
        print(f"{prog}: could not ask Flink at {target.rest_url} whether job {target.job_name!r} still runs "
              f"({exc}); if it does, it may still write into {folder}: cancel it in Flink's web UI first",
              file=sys.stderr)
        return
    for job in running:
        jid = job["jid"]
        try:
            state = cancel_job(target.rest_url, jid)
        except (OSError, ValueError) as exc:
            state = f"unknown: {exc}"
        if state == "CANCELED":
            print(f"{prog}: the Flink job {jid} ({target.job_name}) was still running after the command stopped: "
                  "cancelled, it writes nothing more", file=sys.stderr)
        elif state in TERMINAL_STATES:
            print(f"{prog}: the Flink job {jid} ({target.job_name}) was still running after the command stopped "
                  f"and ended {state} meanwhile; check {folder} with verify", file=sys.stderr)
        else:
            print(f"{prog}: the Flink job {jid} ({target.job_name}) still runs and may write into {folder}: "
                  f"its cancellation was not confirmed (state {state}); cancel it with "
                  f"curl -X PATCH '{target.rest_url}/jobs/{jid}?mode=cancel' before using the folder",
                  file=sys.stderr)


@contextlib.contextmanager
def no_job_left_running(options, prog: str, folder: str) -> Iterator[None]:
    """Around a pipeline run: if the run ends by any exception (an interruption included) while its Flink
    job still runs on a cluster, cancel that job before the exception goes on to the folder's cleanup."""
    target = prepare(options)
    try:
        yield
    except BaseException:
        if target is not None:
            cancel_left_jobs(target, prog, folder)
        raise
