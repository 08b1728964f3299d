#!/usr/bin/env bash
# Fresh machine -> dependencies, build, and the whole test suite: unit, CLI, interop and
# fuzz-corpus tests in an optimised build, again under AddressSanitizer + UBSan, then the
# library and the CLI built (not tested) with the other compilers and build types users
# pick, then each libFuzzer harness for FUZZ_SECONDS (default 60; 0 skips that stage).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
fuzz_seconds=${FUZZ_SECONDS:-60}
log=$(mktemp)
trap 'rm -f "$log" "$log.build"' EXIT

scripts/install-deps.sh

echo "== release build and tests"
cmake --preset release
cmake --build --preset release -j"$jobs"
ctest --preset release -j"$jobs" | tee -a "$log"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake --preset asan
cmake --build --preset asan -j"$jobs"
ctest --preset asan -j"$jobs" | tee -a "$log"

# Optimisation levels change what gcc and clang can prove (-Wmaybe-uninitialized comes
# and goes with inlining), so every build type must compile warning-free with both
# compilers, not just the tested ones; and the library must build without CUDA, as it does
# on machines without nvcc. Tests are left out: what is checked is that the code compiles.
echo "== build matrix: library, CLI and CUDA module, no tests"
for build in gcc:Release clang:Release gcc:Debug clang:Debug gcc:RelWithDebInfo clang:RelWithDebInfo \
             gcc:Release:nocuda; do
  IFS=: read -r cc type cuda <<<"$build"
  dir=build-matrix-$cc-$(echo "$type" | tr '[:upper:]' '[:lower:]')${cuda:+-$cuda}
  started=$SECONDS
  if ! { cmake -S . -B "$dir" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE="$type" -DCKPT_BUILD_TESTS=OFF \
           ${cuda:+-DCKPT_WITH_CUDA=OFF} &&
         cmake --build "$dir" -j"$jobs"; } >"$log.build" 2>&1; then
    cat "$log.build"
    echo "-- $cc $type${cuda:+ ($cuda)}: FAILED ($dir)"
    exit 1
  fi
  echo "-- $cc $type${cuda:+ ($cuda)}: built in $((SECONDS - started)) s ($dir)"
done
rm -f "$log.build"

if [ "$fuzz_seconds" -gt 0 ]; then
  echo "== libFuzzer, ${fuzz_seconds}s per harness"
  cmake --preset fuzz
  cmake --build --preset fuzz -j"$jobs"
  # Everything a run writes (new inputs, and the crash-, leak-, oom- or timeout- file of a
  # failure) goes to its own temporary directory, never into the repository.
  for fuzzer in build-fuzz/tests/*_fuzzer; do
    name=$(basename "$fuzzer" _fuzzer)
    corpus=tests/fuzz/corpora/$name
    work=$(mktemp -d)
    mkdir "$work/corpus" "$work/found"
    cp -r "$corpus"/. "$work/corpus"/
    dict=()
    for d in tests/fuzz/*.dict; do
      case "$name" in "$(basename "$d" .dict)"*) dict=(-dict="$d") ;; esac
    done
    echo "-- $name"
    status=0
    "$fuzzer" "${dict[@]}" -max_total_time="$fuzz_seconds" -max_len=65536 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$work/found/" "$work/corpus" >"$work/log" 2>&1 || status=$?
    if [ "$status" -ne 0 ]; then
      tail -n 60 "$work/log"
      for found in "$work"/found/*; do
        [ -f "$found" ] || continue
        echo "-- $name: the failing input, $(basename "$found") ($(stat -c %s "$found") bytes), in base64:"
        base64 "$found" | head -c 65536
        echo
      done
      echo "-- $name: FAILED (exit $status); replay the input with $fuzzer FILE"
      rm -rf "$work"
      exit 1
    fi
    tail -n 12 "$work/log"
    rm -rf "$work"
  done
fi
fuzzers=$(ls build-fuzz/tests/*_fuzzer 2>/dev/null | wc -l || true)  # none built when FUZZ_SECONDS=0
# Tests that ctest ran and passed; skipped ones (the CUDA tests without a GPU) are not counted.
passed=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed' "$log" || true)
[ "$fuzz_seconds" -gt 0 ] && passed=$((passed + fuzzers))
echo "all test stages passed (release, ASan+UBSan, build matrix, ${fuzz_seconds}s of libFuzzer per harness)"
echo "tests: $passed passed, 0 failed"
