#!/usr/bin/env bash
# Installs everything kiln needs on a fresh Debian 12 machine, one line per step; the package
# managers' own output goes to a log file, whose path is printed if a step fails. Safe to run
# twice: what is already installed is left as it is.
#   KILN_DEPS_LOG   where the log goes (default: $TMPDIR/kiln-install-deps.log)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log=${KILN_DEPS_LOG:-${TMPDIR:-/tmp}/kiln-install-deps.log}
: > "$log"

packages=(
  build-essential cmake pkg-config
  libtomlplusplus-dev   # kiln.toml parser (compiled into libkiln, header-only mode)
  libssl-dev            # SHA-256 and Ed25519 through OpenSSL 3 EVP
  libzstd-dev zstd      # member compression; zstd CLI is the pack benchmark's baseline
  libcli11-dev          # argument parsing for the kiln command
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  openssl               # the verify benchmark's baseline
  python3 python3-jsonschema  # checks schema/kiln.schema.json against the examples
  python3-pytest python3-numpy # the Python bindings' tests (NumPy arrays as arguments)
  python3-cryptography        # tests/unit/dsse_verify.py: an independent check of kiln's signed attestations
  python3-venv                # the project-local venv for NVIDIA's CUDA compiler wheels (below)
  python3-dev                 # Python.h: kiln._fastlaunch, the bindings' C launch path (packager/python/CMakeLists.txt)
  cargo                       # builds examples/rust against the installed libkiln
  golang-go                   # builds examples/go (cgo) against the installed libkiln
  hipcc                       # Debian's HIP compiler (clang 15): real AMD code objects for the tests
  abigail-tools               # abidiff: libkiln against the checked-in v1 ABI baseline
  clang-14 libclang-rt-14-dev # libFuzzer for tests/fuzz
  libcurl4-openssl-dev        # kiln push/pull: the OCI Distribution API over HTTPS (the kiln command only)
  docker-registry skopeo      # the registry tests: a real registry (CNCF Distribution) and a second client
  apache2-utils               # htpasswd: the registry tests' Basic-auth registry (bcrypt password file)
)

# step "WHAT" COMMAND...: prints one line for the step, runs COMMAND with its output in the log,
# and on failure prints the log's tail and where the whole log is.
. "$root/ci/progress.sh"
step() {
  local what=$1 start=$SECONDS
  shift
  printf 'kiln: %s ... ' "$what"
  echo "== $what: $*" >> "$log"
  if progress_run "$log" "$@"; then
    echo "done ($((SECONDS - start)) s)"
  else
    echo "FAILED"
    echo "---- last lines of $log:" >&2
    tail -n 25 "$log" >&2
    echo "kiln: install-deps failed at '$what'; the whole log is $log" >&2
    exit 1
  fi
}

as_root=()
[ "$(id -u)" -ne 0 ] && as_root=(sudo)
apt() { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Use-Pty=0 "$@"; }

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  step "apt-get update" apt update
  step "installing ${#missing[@]} Debian packages (${missing[*]})" apt install --no-install-recommends "${missing[@]}"
else
  echo "kiln: Debian packages: all ${#packages[@]} already installed"
fi

# The CUDA compiler. Debian 12 packages none; where a CUDA toolkit is installed (nvcc on PATH or
# in /usr/local/cuda) the build uses it. Otherwise NVIDIA's own compiler wheels from PyPI, pinned
# by version and hash in ci/cuda-wheels.txt, go into the project-local venv .cuda/venv, and
# .cuda/toolkit (a link to the wheels' CUDA tree: bin/nvcc, include/, nvvm/) is where CMake
# finds them. The link is made last, so a half-finished install is redone, not used.
cuda=$root/.cuda
pins=$root/ci/cuda-wheels.txt
pins_digest=$(sha256sum "$pins" | cut -d' ' -f1)
system_nvcc=$(command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
nvcc_release() { "$1" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'; }

# (A && chain, not set -e: errexit does not apply inside a function that `step` runs under `if`.)
install_cuda_wheels() {
  local site
  rm -rf "$cuda" && mkdir -p "$cuda" &&
    python3 -m venv "$cuda/venv" &&
    "$cuda/venv/bin/pip" install --disable-pip-version-check --no-input --require-hashes -r "$pins" &&
    site=$("$cuda/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') &&
    "$site/nvidia/cu13/bin/nvcc" --version &&
    echo "$pins_digest" > "$cuda/pins.sha256" &&
    ln -s "$site/nvidia/cu13" "$cuda/toolkit"
}

if [ -n "$system_nvcc" ]; then
  echo "kiln: CUDA compiler: using the installed toolkit ($system_nvcc, release $(nvcc_release "$system_nvcc"))"
elif [ -x "$cuda/toolkit/bin/nvcc" ] && [ "$(cat "$cuda/pins.sha256" 2>/dev/null)" = "$pins_digest" ]; then
  echo "kiln: CUDA compiler: already in .cuda/ (nvcc release $(nvcc_release "$cuda/toolkit/bin/nvcc"), NVIDIA's PyPI wheels)"
else
  step "CUDA compiler: NVIDIA's nvcc 13.0 wheels from PyPI into .cuda/ (pinned by hash)" install_cuda_wheels
fi

# Python tooling (ci/python-wheels.txt): Triton, for kiln.export's tests to cross-compile real
# Triton kernels, and scikit-build-core, to build the kiln wheel. A venv that sees Debian's
# pytest and NumPy; redone when the pins change.
venv=$root/.venv
py_pins=$root/ci/python-wheels.txt
py_digest=$(sha256sum "$py_pins" | cut -d' ' -f1)
install_python_wheels() {
  rm -rf "$venv" &&
    "$(command -v /usr/bin/python3 || command -v python3)" -m venv --system-site-packages "$venv" &&
    "$venv/bin/pip" install --disable-pip-version-check --no-input --require-hashes -r "$py_pins" &&
    "$venv/bin/python" -c 'import triton, scikit_build_core' &&
    echo "$py_digest" > "$venv/pins.sha256"
}
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/pins.sha256" 2>/dev/null)" = "$py_digest" ]; then
  echo "kiln: Python tooling: already in .venv/ (Triton $("$venv/bin/python" -c 'import triton; print(triton.__version__)'))"
else
  step "Python tooling: Triton 3.6.0 and scikit-build-core from PyPI into .venv/ (pinned by hash)" install_python_wheels
fi
echo "kiln: dependencies ready (log: $log)"
