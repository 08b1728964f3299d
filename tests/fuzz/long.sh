#!/usr/bin/env bash
# Long fuzzing runs: every libFuzzer harness in turn, one process at a time, for a budget
# per harness, keeping what each run finds for the next one.
#
#   tests/fuzz/long.sh [options] BUDGET [HARNESS...]
#
# BUDGET is per harness: a time (900, 900s, 15m, 2h) or a number of executions followed
# by x (10000000x, 10Mx, 500kx). HARNESS names (pickle_read, ...) pick some; default all
# of BUILD/tests/*_fuzzer. Build them first:
#   cmake --preset fuzz && cmake --build --preset fuzz -j2
#
# Options:
#   --max-time T       stop each harness after T as well (with an execution budget)
#   --work DIR         corpora, crashes and logs kept across runs (default: .fuzz in the
#                      repository root, git-ignored)
#   --build DIR        where the harnesses are built (default: build-fuzz)
#   --update-corpora   afterwards, merge (-merge=1) the inputs that reach code the committed
#                      corpora tests/fuzz/corpora/<harness>/ do not (edges, not hit counts:
#                      -use_counters=0) into them; a budget of 0 merges what earlier runs
#                      left in the work directory without fuzzing
#   --max-len N        largest input libFuzzer makes (default 65536)
#   --corpus-max-len N inputs merged into the committed corpora are cut to N bytes (default
#                      8192): what they reach is in their first bytes, and the repository
#                      stays small
#   --restarts N       runs after a crash before moving on to the next harness (default 3)
#
# For each harness: DIR/<harness>/corpus/ grows run after run (the committed corpus is
# read too, never written, but by --update-corpora), DIR/<harness>/crashes/ keeps crash,
# leak, timeout and out-of-memory inputs, DIR/<harness>/logs/ the libFuzzer output. At the
# end a table gives per harness: executions, seconds, executions per second, corpus files
# (work directory) and crashes. The exit status is 1 when a harness crashed.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
work=$root/.fuzz
build=$root/build-fuzz
update=0
max_len=65536
corpus_max_len=8192
restarts=3
max_time=
budget=
harnesses=()

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
    exit "${1:-2}"
}

# Seconds from 900, 900s, 15m, 2h.
seconds_of() {
    case "$1" in
        *[0-9]s) echo "${1%s}" ;;
        *[0-9]m) echo $((${1%m} * 60)) ;;
        *[0-9]h) echo $((${1%h} * 3600)) ;;
        *) echo "$1" ;;
    esac
}

# Executions from 10000000x, 10Mx, 500kx.
runs_of() {
    local n=${1%x}
    case "$n" in
        *[kK]) echo $((${n%[kK]} * 1000)) ;;
        *M) echo $((${n%M} * 1000000)) ;;
        *) echo "$n" ;;
    esac
}

while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage 0 ;;
        --max-time) max_time=$(seconds_of "$2"); shift 2 ;;
        --work) work=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --update-corpora) update=1; shift ;;
        --max-len) max_len=$2; shift 2 ;;
        --corpus-max-len) corpus_max_len=$2; shift 2 ;;
        --restarts) restarts=$2; shift 2 ;;
        -*) echo "long.sh: unknown option $1" >&2; usage ;;
        *) if [ -z "$budget" ]; then budget=$1; else harnesses+=("$1"); fi; shift ;;
    esac
done
[ -n "$budget" ] || usage

time_budget=0
run_budget=0
case "$budget" in
    *x) run_budget=$(runs_of "$budget") ;;
    *) time_budget=$(seconds_of "$budget") ;;
esac
if ! [[ "$time_budget$run_budget" =~ ^[0-9]+$ ]] || { [ -n "$max_time" ] && ! [[ "$max_time" =~ ^[0-9]+$ ]]; }; then
    echo "long.sh: cannot read budget '$budget'${max_time:+ or --max-time '$max_time'}" >&2
    exit 2
fi
[ -z "$max_time" ] && [ "$run_budget" -gt 0 ] && max_time=0

if [ ${#harnesses[@]} -eq 0 ]; then
    for f in "$build"/tests/*_fuzzer; do
        [ -x "$f" ] && harnesses+=("$(basename "$f" _fuzzer)")
    done
fi
if [ ${#harnesses[@]} -eq 0 ]; then
    echo "long.sh: no harnesses in $build/tests; build them: cmake --preset fuzz && cmake --build --preset fuzz -j2" >&2
    exit 2
fi

# The writer syncs what it commits: round-trip harnesses write into memory when they can.
scratch=$(mktemp -d "$( [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/ckpt_fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch
# One process, one thread: the library's OpenMP loops stay on this core.
export OMP_NUM_THREADS=1

# The dictionaries a harness uses: its format's, and pickle's for formats built on pickle.
dicts_for() {
    case "$1" in
        pickle_*) echo pickle ;;
        pdparams_*) echo pickle pdparams ;;
        torch_*) echo zip pickle ;;
        zip_*) echo zip ;;
        safetensors_*) echo safetensors ;;
    esac
}

files_in() {
    find "$1" -maxdepth 1 -type f 2>/dev/null | wc -l
}

# The last value of a libFuzzer final statistic in a log, or empty.
stat_of() {
    sed -n "s/^stat::$1: *\([0-9]*\).*/\1/p" "$2" | tail -n 1
}

# Executions a run made: its final statistics, else the last status line (#N ...).
execs_of() {
    local n
    n=$(stat_of number_of_executed_units "$1")
    [ -n "$n" ] || n=$(sed -n 's/^#\([0-9][0-9]*\)[[:space:]].*/\1/p' "$1" | tail -n 1)
    echo "${n:-0}"
}

summary=()
failed=0
for h in "${harnesses[@]}"; do
    fuzzer=$build/tests/${h}_fuzzer
    committed=$root/tests/fuzz/corpora/$h
    dir=$work/$h
    if [ ! -x "$fuzzer" ]; then
        echo "long.sh: $fuzzer is not built" >&2
        exit 2
    fi
    mkdir -p "$dir/corpus" "$dir/crashes" "$dir/logs" "$committed"
    dict_args=()
    : >"$dir/dict"
    for d in $(dicts_for "$h"); do
        cat "$root/tests/fuzz/$d.dict" >>"$dir/dict"
    done
    [ -s "$dir/dict" ] && dict_args=(-dict="$dir/dict")

    execs=0
    secs=0
    crashes=0
    runs=0
    echo "== $h"
    while [ "$time_budget" -gt 0 ] || [ "$run_budget" -gt 0 ]; do
        limit_args=()
        if [ "$run_budget" -gt 0 ]; then
            left=$((run_budget - execs))
            [ "$left" -gt 0 ] || break
            limit_args+=(-runs="$left")
            if [ "$max_time" -gt 0 ]; then
                [ $((max_time - secs)) -gt 0 ] || break
                limit_args+=(-max_total_time=$((max_time - secs)))
            fi
        else
            left=$((time_budget - secs))
            [ "$left" -gt 0 ] || break
            limit_args+=(-max_total_time="$left")
        fi
        log=$dir/logs/$(date +%Y%m%d-%H%M%S).log
        before=$(files_in "$dir/crashes")
        started=$(date +%s)
        status=0
        "$fuzzer" "${dict_args[@]}" "${limit_args[@]}" -max_len="$max_len" -timeout=25 -rss_limit_mb=2048 \
            -print_final_stats=1 -artifact_prefix="$dir/crashes/" "$dir/corpus" "$committed" >"$log" 2>&1 || status=$?
        secs=$((secs + $(date +%s) - started))
        n=$(execs_of "$log")
        execs=$((execs + n))
        runs=$((runs + 1))
        found=$(( $(files_in "$dir/crashes") - before ))
        if [ "$status" -ne 0 ]; then
            crashes=$((crashes + (found > 0 ? found : 1)))
            failed=1
            echo "-- $h: run $runs stopped (exit $status) after $n executions; log $log"
            grep -E '^(==[0-9]+==ERROR|SUMMARY|.*fuzz assertion failed)' "$log" | head -n 5 || true
            [ "$runs" -le "$restarts" ] || break
            continue
        fi
        # a run that ends early without a crash (e.g. -runs reached) is the end of the budget
        break
    done
    rate=0
    [ "$secs" -gt 0 ] && rate=$((execs / secs))
    summary+=("$(printf '%-24s %14s %8s %8s %8s %8s' "$h" "$execs" "$secs" "$rate" "$(files_in "$dir/corpus")" "$crashes")")
    echo "${summary[-1]}"

    if [ "$update" -eq 1 ]; then
        added_before=$(files_in "$committed")
        mlog=$dir/logs/merge-$(date +%Y%m%d-%H%M%S).log
        if ! "$fuzzer" -merge=1 -use_counters=0 -max_len="$corpus_max_len" -timeout=25 -rss_limit_mb=2048 "$committed" "$dir/corpus" \
            >"$mlog" 2>&1; then
            echo "-- $h: merge failed; log $mlog"
            failed=1
        fi
        echo "-- $h: merged $(( $(files_in "$committed") - added_before )) inputs into tests/fuzz/corpora/$h" \
             "($(files_in "$committed") files, $(du -sh "$committed" | cut -f1))"
    fi
done

echo
printf '%-24s %14s %8s %8s %8s %8s\n' harness executions seconds exec/s corpus crashes
printf '%s\n' "${summary[@]}"
exit "$failed"
