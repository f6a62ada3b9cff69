"""A job server named by ``--job_endpoint`` is waited for a bounded time, then named in one line.

Beam's PortableRunner (and the FlinkRunner or SparkRunner given ``--job_endpoint``) first waits until the
job server's gRPC channel is ready, for ``--job_server_timeout`` seconds (300 by default), and says
nothing meanwhile: a mistyped port or a job server that is not up looked like a hung command for five
minutes, then ended in a traceback. Lowering ``--job_server_timeout`` is no cure: Beam uses the same
number as the deadline of its requests to the job server, the stream of the job's state among them.
So a command waits for the job server itself, before it touches its output folder, at most
``--job-endpoint-wait`` seconds (DEFAULT_WAIT_S).
"""

from __future__ import annotations

from domain.errors import NotariusError

# Runners that submit through a job server: with --job_endpoint, Beam waits for it (runners above);
# without, they start one of their own (or refuse, PortableRunner).
JOB_SERVER_RUNNERS = ("PortableRunner", "FlinkRunner", "SparkRunner", "PrismRunner")
DEFAULT_WAIT_S = 30.0
# Beam's value of --job_endpoint for a job service inside the submitting process (nothing to wait for).
EMBEDDED_ENDPOINT = "embed"


class JobServiceUnreachable(NotariusError):
    """No job server answered at the endpoint within the wait; the text names both."""


def external_job_endpoint(options) -> str | None:
    """The ``--job_endpoint`` the run will wait for, or None (no job-server runner, no endpoint, or ``embed``)."""
    from apache_beam.options.pipeline_options import PortableOptions, StandardOptions

    runner = (options.view_as(StandardOptions).runner or "").rsplit(".", 1)[-1]
    endpoint = (options.view_as(PortableOptions).job_endpoint or "").strip()
    if runner not in JOB_SERVER_RUNNERS or not endpoint or endpoint == EMBEDDED_ENDPOINT:
        return None
    return endpoint


def wait_for_job_service(endpoint: str, wait_s: float) -> None:
    """Return once a gRPC connection to ``endpoint`` is ready; JobServiceUnreachable after ``wait_s`` seconds."""
    import grpc

    channel = grpc.insecure_channel(endpoint)
    try:
        grpc.channel_ready_future(channel).result(timeout=wait_s)
    except grpc.FutureTimeoutError:
        raise JobServiceUnreachable(
            f"no job server answered at {endpoint} (--job_endpoint) within {wait_s:g} s: start it (make "
            f"flink-up keeps one on localhost:8099) or correct the address; --job-endpoint-wait SECONDS "
            f"waits longer") from None
    finally:
        channel.close()
