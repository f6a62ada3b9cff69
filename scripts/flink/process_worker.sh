#!/bin/sh
# The command of a PROCESS environment (--environment_type=PROCESS): Beam's Python boot program,
# the one Dataflow and the Beam SDK containers run, given a semi-persistent directory of its own.
#
#   --environment_config='{"command": "<checkout>/scripts/flink/process_worker.sh",
#                          "env": {"NOTARIUS_BEAM_BOOT": "<go bin>/container", "PATH": "<env>/bin:/usr/bin:/bin"}}'
#
# The TaskManager starts it with --id, --provision_endpoint, --artifact_endpoint, --logging_endpoint and
# --control_endpoint. The boot program fetches the staged files (the job's --setup_file sdist among them)
# into <semi_persist_dir>/staged, installs them with pip into a venv of its own made from the first
# `python` on PATH (with that environment's packages visible: Beam must be installed there), and runs
# Beam's SDK harness. Its default semi-persistent directory is /tmp for every worker: in a container of
# its own that is private, here several workers share the machine and would fetch into one folder.
set -eu
boot=${NOTARIUS_BEAM_BOOT:?"set NOTARIUS_BEAM_BOOT to Beam's Python boot program (go install github.com/apache/beam/sdks/v2/python/container@v<beam version>)"}
dir=$(mktemp -d "${TMPDIR:-/tmp}/beam-boot.XXXXXX")
"$boot" --semi_persist_dir="$dir" "$@" &
child=$!
# The TaskManager stops a worker with SIGTERM to this process: pass it on (the boot program then
# stops the SDK harness), wait for it, and remove the directory.
trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT HUP
status=0
wait "$child" || status=$?
while kill -0 "$child" 2>/dev/null; do wait "$child" || status=$?; done
rm -rf "$dir"
exit "$status"
