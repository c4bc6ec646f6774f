#!/usr/bin/env bash
# Install the Debian packages lonnymq needs to build and test (used by `make deps`).
#
#   tools/install-system-deps.sh PACKAGE...
#
# Does nothing when every package is already installed (checked with dpkg-query).
# Otherwise: as root runs `apt-get update` once and `apt-get install`; as another
# user does the same through sudo when sudo exists, else prints what to install
# and fails.
set -euo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: $0 PACKAGE..." >&2
    exit 2
fi
packages=("$@")

# A Debian system python3 needs python3-venv for `python3 -m venv`.
py=$(command -v python3 || true)
if [ -n "$py" ] && [ "$(readlink -f "$py")" = "$(readlink -f /usr/bin/python3 2>/dev/null || echo none)" ] \
        && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    packages+=(python3-venv)
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps: dpkg-query not found (not Debian?); make sure these are installed: ${packages[*]}" >&2
    for cmd in pg_config pg_prove; do
        command -v "$cmd" >/dev/null 2>&1 || { echo "deps: $cmd not found" >&2; exit 1; }
    done
    exit 0
fi

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [ "$status" != "install ok installed" ]; then
        missing+=("$p")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "deps: system packages present (${packages[*]})"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "deps: missing Debian packages: ${missing[*]}" >&2
    echo "deps: not root and no sudo; as root run:" >&2
    echo "    apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
fi

echo "deps: installing ${missing[*]} (apt-get; its output is shown only on failure)"
log=$(mktemp "${TMPDIR:-/tmp}/lonnymq-apt.XXXXXX")
trap 'rm -f "$log"' EXIT
apt() {
    if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@" >>"$log" 2>&1; then
        cat "$log" >&2
        echo "deps: apt-get $1 failed" >&2
        exit 1
    fi
}
apt update -q
apt install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 "${missing[@]}"
echo "deps: installed ${missing[*]}"
