#!/usr/bin/env bash
# ctest python_wheel: builds the kiln wheel from packager/python with scikit-build-core (as
# `pip install packager/python` does, here without network: the tooling venv .venv holds
# scikit-build-core), installs it into a fresh venv and runs the package's tests against the
# installed copy: the bundled libkiln and kiln command, no KILN_LIBRARY, no source tree on the
# path. Exits 77 (skipped) without .venv (run ci/install-deps.sh).
#   wheel_test.sh WORK_DIR [BUILD_DIR]
# Without BUILD_DIR the wheel is built from source exactly as users build it (a Release CMake build
# of libkiln and the kiln command, several minutes on 2 cores).
# With BUILD_DIR (ctest passes its own build folder) the wheel is still made by scikit-build-core
# from packager/python's pyproject.toml, through the user path's CMake configure (Release,
# KILN_WHEEL=ON, no tests, examples or benchmarks) and its `cmake --install --component wheel`,
# but that configure's build folder is first given BUILD_DIR's already-built libkiln and kiln
# command, and only kiln._fastlaunch (one C file) is compiled: the wheel is the one users get, with
# the suite's RelWithDebInfo libkiln and kiln in place of a second Release compile of the same
# sources. Before that, the user path's CMake options are compared with BUILD_DIR's: any KILN_*
# option on which they differ (other than the wheel's own: KILN_WHEEL and no tests, benchmarks or
# examples) fails the test, since the wheel would then not hold what `pip install` builds.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=$1
prebuilt=${2:+$(cd "$2" && pwd)}
tooling=$root/.venv/bin/python
if [ ! -x "$tooling" ]; then
  echo "python_wheel: SKIPPED: no tooling venv at $root/.venv (ci/install-deps.sh makes it)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/dist"
# The wheel's CMake build folder: here, never packager/python/build (pyproject's build-dir), which
# an earlier `pip install packager/python` in this checkout may hold.
settings=(--config-settings="build-dir=$work/cmake")
if [ -n "$prebuilt" ]; then
  echo "== building the wheel (scikit-build-core; the user path's CMake configure and install, libkiln and the kiln command from $prebuilt)"
  mkdir -p "$work/cmake/lib" "$work/cmake/bin"
  cp -a "$prebuilt"/lib/libkiln.so* "$work/cmake/lib/"
  cp -a "$prebuilt/bin/kiln" "$work/cmake/bin/"
  settings+=(--config-settings=build.targets=kiln_fastlaunch)
else
  echo "== building the wheel (scikit-build-core, CMake Release build of libkiln and the kiln command)"
fi
"$tooling" -m pip wheel --disable-pip-version-check --no-build-isolation --no-deps "${settings[@]}" \
  "$root/packager/python" -w "$work/dist" > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
if [ -n "$prebuilt" ]; then
  # The user path's options (its CMakeCache, written by the configure above) against BUILD_DIR's.
  "$tooling" - "$work/cmake/CMakeCache.txt" "$prebuilt/CMakeCache.txt" <<'EOF' || exit 1
import re, sys
def options(path):
    found = {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"(KILN_[A-Z0-9_]+):BOOL=(.*)$", line.strip())
        if m:
            found[m.group(1)] = m.group(2).upper() in ("ON", "1", "TRUE", "YES", "Y")
    return found
wheel, build = options(sys.argv[1]), options(sys.argv[2])
own = {"KILN_WHEEL": True, "KILN_BUILD_TESTS": False, "KILN_BUILD_BENCH": False, "KILN_BUILD_EXAMPLES": False}
wrong = [f"{k}: the wheel's build has it {'ON' if wheel.get(k) else 'OFF'}, expected {'ON' if v else 'OFF'}"
         for k, v in own.items() if wheel.get(k) != v]
wrong += [f"{k}: ON in the user path's build, {'ON' if build.get(k) else 'OFF'} in {sys.argv[2]}"
          if wheel[k] else f"{k}: OFF in the user path's build, ON in {sys.argv[2]}"
          for k in sorted(wheel) if k not in own and build.get(k, False) != wheel[k]]
if not wheel or wrong:
    print("python_wheel: the user path's build configuration differs from the build whose libkiln "
          "and kiln the wheel carries:\n  " + "\n  ".join(wrong or ["no KILN_* options in " + sys.argv[1]]))
    sys.exit(1)
print("the user path's options match the build's:",
      ", ".join(f"{k}={'ON' if wheel[k] else 'OFF'}" for k in sorted(wheel) if k not in own))
EOF
  grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$work/cmake/CMakeCache.txt" ||
    { echo "python_wheel: the user path's build is not a Release build"; exit 1; }
fi
wheel=$(ls "$work"/dist/kiln-*.whl)
echo "built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
# A fresh venv over the base interpreter (Debian's pytest and NumPy); the tooling venv's
# site-packages joins it through a .pth file so that Triton is there too, without a download.
base=$("$tooling" -c 'import sys; print(sys._base_executable)')
"$base" -m venv --system-site-packages "$work/venv"
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$tooling" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/kiln-test-tooling.pth"
"$work/venv/bin/python" -m pip install --disable-pip-version-check --no-index --no-deps "$wheel" > "$work/install.log" 2>&1 \
  || { cat "$work/install.log"; exit 1; }
cd "$work"
# The wheel must carry kiln._fastlaunch wherever it could be built (CPython >= 3.11 and its headers).
expect_extension=$("$work/venv/bin/python" -c 'import os, sys, sysconfig
print(int(sys.version_info >= (3, 11) and os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))))')
[ "$expect_extension" = 1 ] || echo "python_wheel: no Python.h here: the wheel is tested without kiln._fastlaunch"
export KILN_TEST_EXPECT_EXTENSION=$([ "$expect_extension" = 1 ] && echo 1 || echo "")
env -u KILN_LIBRARY -u PYTHONPATH KILN_EXPECT_INSTALLED_WHEEL=1 KILN_CLI="$work/venv/bin/kiln" \
  "$work/venv/bin/python" -m pytest -q -rs -p no:cacheprovider -m "not gpu" "$root/packager/python/tests"
