# The job's Python SDK worker for Flink TaskManagers that are not this machine: Beam's Python SDK image
# of the version the project pins (apache-beam 2.77, Python 3.11 like the project's environment), with the
# project installed. Its entrypoint stays Beam's boot program (/opt/apache/beam/boot), so one image serves
# both ways docs/running.md describes ("Flink on a real cluster"):
#
#   - DOCKER environment: each TaskManager host runs the image per worker
#       --environment_type=DOCKER --environment_config=REGISTRY/notarius-flink-worker:0.1.0
#   - worker pool sidecar (EXTERNAL): one container beside each TaskManager, started with --worker_pool
#       docker run ... REGISTRY/notarius-flink-worker:0.1.0 --worker_pool
#       --environment_type=EXTERNAL --environment_config=localhost:50000
#
# Build from the checkout (not buildable on the project's own machines: no Docker daemon, no registry):
#   python -m build --wheel --outdir dist .
#   docker build -f docker/flink-worker.Dockerfile -t REGISTRY/notarius-flink-worker:0.1.0 .
#
# Keep the tag's Beam version equal to the submitting environment's (`python -c "import apache_beam as b;
# print(b.__version__)"`): the SDK harness and the submitting SDK must be the same release.
ARG BEAM_VERSION=2.77.0
FROM apache/beam_python3.11_sdk:${BEAM_VERSION}
ARG BEAM_VERSION

# The project's wheel, built as above. pip keeps the image's apache-beam (the project asks for >=2.77,<3,
# which the image's satisfies) and adds what the image lacks (msgspec, isal, cramjam, lz4, backports.zstd
# and the like). The wheel carries every asset (prompts, schemas, catalogs) as package data.
COPY dist/notarius_reprocess-*.whl /tmp/wheels/
RUN pip install --no-cache-dir /tmp/wheels/notarius_reprocess-*.whl \
    && python -c "import apache_beam, pipelines.reprocess, domain.assets; assert apache_beam.__version__ == '${BEAM_VERSION}', apache_beam.__version__" \
    && rm -rf /tmp/wheels

# Installed in the image: a job needs no --setup_file staging, and workers start without pip.
# (A job that still stages --setup_file gets it installed again over this, per worker.)
