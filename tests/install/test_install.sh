#!/usr/bin/env bash
# Install the build into a temporary prefix, then build and run a consumer program with
# the CMake package and with pkg-config. Usage: test_install.sh BUILD_DIR SAMPLE_CHECKPOINT
set -euo pipefail
build=$1
sample=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" > /dev/null
cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
cmake --build "$work/cmake" > /dev/null
LD_LIBRARY_PATH="$work/prefix/lib" "$work/cmake/consumer" "$sample"

export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
cc "$here/consumer.c" $(pkg-config --cflags --libs ckpt) -o "$work/consumer-pc"
LD_LIBRARY_PATH="$work/prefix/lib" "$work/consumer-pc" "$sample"
