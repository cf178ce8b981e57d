#!/usr/bin/env bash
# Installs everything kiln needs on a fresh Debian 12 machine. Safe to run twice:
# apt-get skips what is already installed, and nothing else is changed.
set -euo pipefail

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
  python3-pytest              # the Python bindings' tests
  cargo                       # builds examples/rust against the installed libkiln
  hipcc                       # Debian's HIP compiler (clang 15): real AMD code objects for the tests
  abigail-tools               # abidiff: libkiln against the checked-in v1 ABI baseline
  clang-14 libclang-rt-14-dev # libFuzzer for tests/fuzz
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "kiln: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "kiln: all Debian packages already installed"
fi

# nvcc is not in Debian 12's main archive. Where the CUDA toolkit is present (as on the
# project's build machines) the examples' real cubins and PTX are built; without it the
# build says so, and the tests that need nvcc-built code objects report themselves skipped.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "kiln: CUDA toolkit found ($( (command -v nvcc || echo /usr/local/cuda/bin/nvcc) ))"
else
  echo "kiln: note: no CUDA toolkit (nvcc) on this machine; CUDA examples will be skipped"
fi
