#!/usr/bin/env bash
# Builds the kiln wheel (packager/python) from a build folder the demo or the suite already made:
# scikit-build-core runs the user path's CMake configure (Release, KILN_WHEEL=ON, no tests,
# examples or benchmarks) and its `cmake --install --component wheel`, but its build folder is
# first given BUILD_DIR's libkiln and kiln command, so only kiln._fastlaunch (one C file) is
# compiled: seconds, where `pip install packager/python` compiles everything again (about ten
# minutes on 2 cores). The user path's KILN_* options are compared with BUILD_DIR's first; a
# difference (other than the wheel's own) is refused, since the wheel would then not hold what
# `pip install` builds. Needs the tooling venv .venv (ci/install-deps.sh: scikit-build-core).
#   ci/wheel.sh [BUILD_DIR [OUT_DIR]]     (default build, build/wheel); prints the wheel's path last
# Also `cmake --build build --target kiln_wheel`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prebuilt=$(cd "${1:-$root/build}" && pwd)
work=${2:-$prebuilt/wheel}
tooling=$root/.venv/bin/python
[ -x "$tooling" ] || { echo "ci/wheel.sh: no tooling venv at $root/.venv (ci/install-deps.sh makes it)" >&2; exit 77; }
[ -x "$prebuilt/bin/kiln" ] && ls "$prebuilt"/lib/libkiln.so.* > /dev/null 2>&1 ||
  { echo "ci/wheel.sh: $prebuilt holds no built libkiln and kiln command (./ci/demo.sh builds them)" >&2; exit 2; }
rm -rf "$work" && mkdir -p "$work/dist"
# The wheel's CMake build folder: here, never packager/python/build (pyproject's build-dir), which
# an earlier `pip install packager/python` in this checkout may hold.
settings=(--config-settings="build-dir=$work/cmake")
echo "== building the wheel (scikit-build-core; the user path's CMake configure and install, libkiln and the kiln command from $prebuilt)"
mkdir -p "$work/cmake/lib" "$work/cmake/bin"
cp -a "$prebuilt"/lib/libkiln.so* "$work/cmake/lib/"
cp -a "$prebuilt/bin/kiln" "$work/cmake/bin/"
settings+=(--config-settings=build.targets=kiln_fastlaunch)
"$tooling" -m pip wheel --disable-pip-version-check --no-build-isolation --no-deps "${settings[@]}" \
  "$root/packager/python" -w "$work/dist" > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
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
    print("ci/wheel.sh: the user path's build configuration differs from the build whose libkiln "
          "and kiln the wheel carries:\n  " + "\n  ".join(wrong or ["no KILN_* options in " + sys.argv[1]]))
    sys.exit(1)
print("the user path's options match the build's:",
      ", ".join(f"{k}={'ON' if wheel[k] else 'OFF'}" for k in sorted(wheel) if k not in own))
EOF
grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$work/cmake/CMakeCache.txt" ||
  { echo "ci/wheel.sh: the user path's build is not a Release build"; exit 1; }
echo "$(ls "$work"/dist/kiln-*.whl)"
