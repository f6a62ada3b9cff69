#!/bin/sh
# Make a headless Chromium available for the report's browser test
# (tests/test_report.py). Installs Debian's `chromium` package with apt-get
# when it is missing and we run as root; otherwise says why not and exits 0,
# so `make test` still runs (the browser test then skips with that reason).
#
#   scripts/ensure_chromium.sh        # prints the browser's path, or why there is none
set -u

find_chromium() {
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
        found=$(command -v "$name" 2>/dev/null) && { echo "$found"; return 0; }
    done
    return 1
}

if path=$(find_chromium); then
    echo "chromium: $path"
    exit 0
fi
if [ "$(id -u)" != "0" ]; then
    echo "chromium: not installed, and not running as root to install it (as root: apt-get install -y chromium)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium: not installed, and apt-get is not available on this machine"
    exit 0
fi

echo "chromium: installing Debian's chromium package with apt-get (once) ..."
# Other jobs may hold the dpkg lock: wait for it instead of failing.
lock="-o DPkg::Lock::Timeout=600"
log=$(mktemp)
if ! { DEBIAN_FRONTEND=noninteractive apt-get $lock update -q &&
       DEBIAN_FRONTEND=noninteractive apt-get $lock install -y -q --no-install-recommends chromium; } >"$log" 2>&1; then
    tail -n 5 "$log"
    rm -f "$log"
    echo "chromium: apt-get could not install chromium (see the lines above)"
    exit 0
fi
rm -f "$log"
if path=$(find_chromium); then
    echo "chromium: $path"
else
    echo "chromium: apt-get finished but no chromium binary is on PATH"
fi
exit 0
