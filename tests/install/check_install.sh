#!/usr/bin/env bash
# Installs a build into a fresh prefix and builds the embedders against the *installed* tree:
# examples/c through CMake's find_package(kiln) and through pkg-config, examples/go through cgo
# and pkg-config, examples/rust through plain extern "C" (cargo, offline). Each one must open ARCHIVE and print its kernels' routes.
# The C++ face (kiln/kiln.hpp, installed beside kiln.h) compiles examples/embed_cpp through pkg-config.
# With MATMUL_ARCHIVE (the example's matmul-relu archive), the README's C program
# (examples/c/matmul_routes.c) is built through pkg-config and must run its kernel correctly, and so
# must examples/embed_cpp.
#   usage: check_install.sh BUILD_DIR ARCHIVE TRUSTED_KEY [MATMUL_ARCHIVE]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1 archive=$2 key=$3 matmul_archive=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(dirname "$(find "$prefix" -name 'libkiln.so.0' | head -1)")
[ -n "$lib" ] || { echo "no libkiln.so.0 installed"; exit 1; }
soname=$(readelf -d "$lib/libkiln.so.0" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libkiln.so.0 ] || { echo "SONAME is '$soname'"; exit 1; }
for f in include/kiln/kiln.h include/kiln/kiln.hpp bin/kiln; do [ -e "$prefix/$f" ] || { echo "missing $f"; exit 1; }; done
[ -L "$lib/libkiln.so" ] || { echo "missing the libkiln.so development link"; exit 1; }
"$prefix/bin/kiln" --version
echo "installed: $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"

echo "== C via find_package(kiln)"
cmake -S "$root/examples/c" -B "$work/c" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_RPATH="$lib" >/dev/null
cmake --build "$work/c" >/dev/null
"$work/c/kiln_routes" "$archive" "$key"

echo "== C via pkg-config kiln"
export PKG_CONFIG_PATH="$lib/pkgconfig"
# The flags name the prefix installed under, as plain paths.
[ "$(pkg-config --cflags kiln | tr -d " ")" = "-I$prefix/include" ] || { echo "pkg-config --cflags kiln: $(pkg-config --cflags kiln)"; exit 1; }
cc -std=c99 -Wall -Wextra -pedantic -Werror "$root/examples/c/routes.c" $(pkg-config --cflags --libs kiln) \
  -Wl,-rpath,"$lib" -o "$work/routes_pc"
"$work/routes_pc" "$archive" "$key"

if [ -n "$matmul_archive" ]; then
  echo "== the README's C program (examples/c/matmul_routes.c) via pkg-config kiln"
  cc -std=c99 -Wall -Wextra -pedantic -Werror "$root/examples/c/matmul_routes.c" $(pkg-config --cflags --libs kiln) \
    -Wl,-rpath,"$lib" -o "$work/matmul_routes"
  out=$("$work/matmul_routes" "$matmul_archive" "$key")
  echo "$out"
  # Without a GPU the reference runs: c[0] = relu(2 * 2) with every other input zero. On a GPU
  # the program stops after naming the native route.
  case $out in
    native:*|ptx-jit:*) ;;
    *"c[0] = 4 via reference; launches through the reference: 1"*) ;;
    *) echo "matmul_routes printed something unexpected"; exit 1 ;;
  esac
fi

echo "== C++ through kiln/kiln.hpp (examples/embed_cpp) via pkg-config kiln"
c++ -std=c++17 -Wall -Wextra -Wpedantic -Werror "$root/examples/embed_cpp/matmul_demo.cpp" $(pkg-config --cflags --libs kiln) \
  -ldl -Wl,-rpath,"$lib" -o "$work/matmul_demo_cpp"
if [ -n "$matmul_archive" ]; then
  "$work/matmul_demo_cpp" "$matmul_archive" "$key"
fi

echo "== Go via cgo (8 goroutines launching; the reference is a Go function of kiln_reference_cb's type; errors read without LockOSThread, go test -race)"
if command -v go >/dev/null 2>&1; then
  (cd "$root/examples/go" &&
    GOPATH="$work/gopath" GOCACHE="$work/gocache" GOFLAGS=-mod=mod GOPROXY=off CGO_LDFLAGS="-Wl,-rpath,$lib" \
      go build -o "$work/kiln-go" .)
  "$work/kiln-go" "$archive" "$key"
  # Each goroutine reads its own error without pinning its thread, under the race detector.
  (cd "$root/examples/go" &&
    GOPATH="$work/gopath" GOCACHE="$work/gocache" GOFLAGS=-mod=mod GOPROXY=off CGO_LDFLAGS="-Wl,-rpath,$lib" \
      KILN_GO_TRUST="$key" go test -race -count=1 .)
else
  echo "go is not installed (ci/install-deps.sh installs golang-go); the Go embedder was not built"
  exit 1
fi

echo "== Rust via extern \"C\""
if command -v cargo >/dev/null 2>&1; then
  KILN_PREFIX="$prefix" cargo build --quiet --offline --release --manifest-path "$root/examples/rust/Cargo.toml" \
    --target-dir "$work/rust"
  "$work/rust/release/kiln-routes" "$archive" "$key"
else
  echo "cargo is not installed (ci/install-deps.sh installs it); the Rust embedder was not built"
  exit 1
fi
