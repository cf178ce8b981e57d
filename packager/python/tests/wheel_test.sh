#!/usr/bin/env bash
# ctest python_wheel: builds the kiln wheel from packager/python with scikit-build-core (as
# `pip install packager/python` does, here without network: the tooling venv .venv holds
# scikit-build-core), installs it into a fresh venv and runs the package's tests against the
# installed copy: the bundled libkiln and kiln command, no KILN_LIBRARY, no source tree on the
# path. Exits 77 (skipped) without .venv (run ci/install-deps.sh).
#   wheel_test.sh WORK_DIR [BUILD_DIR]
# Without BUILD_DIR the wheel is built from source exactly as users build it (a Release CMake build
# of libkiln and the kiln command, several minutes on 2 cores).
# With BUILD_DIR (ctest passes its own build folder) the wheel is made by ci/wheel.sh: the user
# path's scikit-build-core configure and install, carrying BUILD_DIR's already-built libkiln and
# kiln command (only kiln._fastlaunch is compiled), its KILN_* options checked against BUILD_DIR's.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=$1
prebuilt=${2:+$(cd "$2" && pwd)}
tooling=$root/.venv/bin/python
if [ ! -x "$tooling" ]; then
  echo "python_wheel: SKIPPED: no tooling venv at $root/.venv (ci/install-deps.sh makes it)"
  exit 77
fi
if [ -n "$prebuilt" ]; then
  bash "$root/ci/wheel.sh" "$prebuilt" "$work"
else
  rm -rf "$work" && mkdir -p "$work/dist"
  echo "== building the wheel (scikit-build-core, CMake Release build of libkiln and the kiln command)"
  "$tooling" -m pip wheel --disable-pip-version-check --no-build-isolation --no-deps \
    --config-settings="build-dir=$work/cmake" "$root/packager/python" -w "$work/dist" > "$work/build.log" 2>&1 ||
    { tail -n 40 "$work/build.log"; exit 1; }
fi
wheel=$(ls "$work"/dist/kiln-*.whl)
echo "built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
# A fresh venv over the base interpreter (Debian's pytest and NumPy); the tooling venv's
# site-packages joins it through a .pth file so that Triton is there too, without a download.
base=$("$tooling" -c 'import sys; print(sys._base_executable)')
"$base" -m venv --system-site-packages "$work/venv"
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$tooling" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/kiln-test-tooling.pth"
"$work/venv/bin/python" -m pip install --disable-pip-version-check --no-index --no-deps --ignore-installed "$wheel" > "$work/install.log" 2>&1 \
  || { cat "$work/install.log"; exit 1; }
cd "$work"
# The wheel must carry kiln._fastlaunch wherever it could be built (CPython >= 3.11 and its headers).
expect_extension=$("$work/venv/bin/python" -c 'import os, sys, sysconfig
print(int(sys.version_info >= (3, 11) and os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))))')
[ "$expect_extension" = 1 ] || echo "python_wheel: no Python.h here: the wheel is tested without kiln._fastlaunch"
export KILN_TEST_EXPECT_EXTENSION=$([ "$expect_extension" = 1 ] && echo 1 || echo "")
env -u KILN_LIBRARY -u PYTHONPATH KILN_EXPECT_INSTALLED_WHEEL=1 KILN_CLI="$work/venv/bin/kiln" \
  "$work/venv/bin/python" -m pytest -q -rs -p no:cacheprovider -m "not gpu" "$root/packager/python/tests"
