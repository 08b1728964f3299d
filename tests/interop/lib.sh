# shellcheck shell=bash
# Sourced by tests/interop/test_*.sh. The environment names the tools:
#   CKPTCONV      the ckptconv binary
#   TORCH_PYTHON  a Python with torch (Debian's python3-torch: /usr/bin/python3)
#   VENV_PYTHON   the project venv's Python (paddle, safetensors, and Debian's torch)
#   TESTDATA      the testdata directory
# A missing tool or framework is a failure, never a skip: scripts/install-deps.sh installs them.
set -euo pipefail

INTEROP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$INTEROP_DIR/../.." && pwd)"
TESTDATA="${TESTDATA:-$REPO_DIR/testdata}"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
VENV_PYTHON="${VENV_PYTHON:-$REPO_DIR/.venv/bin/python}"
export TESTDATA PYTHONWARNINGS=ignore PYTHONDONTWRITEBYTECODE=1

PASSED=0
FAILED=0
FAILURES=()

die() {
    echo "FATAL: $*" >&2
    exit 1
}

[ -n "${CKPTCONV:-}" ] || die "CKPTCONV is not set (the ckptconv binary to test)"
[ -x "$CKPTCONV" ] || die "CKPTCONV=$CKPTCONV is not an executable"
[ -d "$TESTDATA/torch" ] || die "TESTDATA=$TESTDATA has no torch fixtures"
# Absolute, so that a test may change directory.
CKPTCONV="$(cd "$(dirname "$CKPTCONV")" && pwd)/$(basename "$CKPTCONV")"
TESTDATA="$(cd "$TESTDATA" && pwd)"

need_torch() {
    [ -x "$TORCH_PYTHON" ] || die "TORCH_PYTHON=$TORCH_PYTHON not found: run scripts/install-deps.sh"
    "$TORCH_PYTHON" -c 'import torch' 2>/dev/null \
        || die "torch does not import in $TORCH_PYTHON: run scripts/install-deps.sh"
}

need_venv() {
    local mods="$1"
    [ -x "$VENV_PYTHON" ] || die "VENV_PYTHON=$VENV_PYTHON not found: run scripts/install-deps.sh"
    "$VENV_PYTHON" -c "import $mods" 2>/dev/null \
        || die "$mods do not import in $VENV_PYTHON: run scripts/install-deps.sh"
}

need_program() {
    command -v "$1" >/dev/null || die "$1 is not installed: run scripts/install-deps.sh"
}

WORK="$(mktemp -d -t ckpt-interop.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

torch_py() { "$TORCH_PYTHON" "$INTEROP_DIR/torch_check.py" "$@"; }
st_py() { "$VENV_PYTHON" "$INTEROP_DIR/st_check.py" "$@"; }
pd_py() { "$VENV_PYTHON" "$INTEROP_DIR/pd_check.py" "$@"; }

# queue CHECKER CASE CMD ARGS...: adds a check for run_batch (CHECKER: torch, st or pd).
# Importing a framework takes seconds, so each test script runs its checks in one process
# per checker instead of one per case.
queue() {
    local checker="$1" name="$2"
    shift 2
    local IFS=$'\t'
    printf '%s\t%s\n' "$name" "$*" >>"$WORK/$checker.batch"
}

# run_batch CHECKER: runs the queued checks and counts them.
run_batch() {
    local checker="$1" file="$WORK/$1.batch" out="$WORK/$1.batch.out" rc counts
    [ -s "$file" ] || return 0
    set +e
    "${checker}_py" batch "$file" >"$out" 2>&1
    rc=$?
    set -e
    grep -v '^BATCH ' "$out" || true
    counts=$(grep '^BATCH ' "$out" | tail -n 1)
    if [ "$rc" -ne 0 ] || [ -z "$counts" ]; then
        FAILED=$((FAILED + 1))
        FAILURES+=("$checker checker crashed (exit $rc)")
        return 0
    fi
    read -r _ p f <<<"$counts"
    PASSED=$((PASSED + p))
    FAILED=$((FAILED + f))
    if [ "$f" -gt 0 ]; then
        FAILURES+=("$f $checker check(s), see FAIL lines above")
    fi
    rm -f "$file"
}

# case_run NAME CMD...: runs CMD in a subshell that stops at its first failing command, with
# output captured; reports ok/FAIL and counts it. (Not in an `if`: that would turn off
# errexit inside CMD.)
case_run() {
    local name="$1" rc
    shift
    local log="$WORK/case.log"
    set +e
    (set -e; "$@") >"$log" 2>&1
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
        PASSED=$((PASSED + 1))
        echo "ok   $name"
    else
        FAILED=$((FAILED + 1))
        FAILURES+=("$name")
        echo "FAIL $name"
        sed 's/^/     | /' "$log" | tail -n 40
    fi
}

# ckpt ARGS...: runs ckptconv and shows the exact command line when it fails.
ckpt() {
    if ! "$CKPTCONV" "$@"; then
        echo "command failed: ckptconv $*" >&2
        return 1
    fi
}

# unknown_globals IN: the pickle globals outside ckptconv's known set, per `inspect --json`.
unknown_globals() {
    "$CKPTCONV" inspect --json "$1" | "$TORCH_PYTHON" -c '
import json, sys
doc = json.load(sys.stdin)
print(" ".join(g["module"] + "." + g["name"] for g in doc.get("globals", []) if not g["known"]))'
}

# expect_refusal OUTDIR LOG NEEDLE... CMD...: CMD must fail, leave OUTDIR empty and print
# every NEEDLE (separated from CMD by --) on stderr.
expect_refusal() {
    local outdir="$1" errlog="$2"
    shift 2
    local needles=()
    while [ "$1" != "--" ]; do
        needles+=("$1")
        shift
    done
    shift
    if "$@" >"$errlog.out" 2>"$errlog"; then
        echo "expected failure, but succeeded: $*"
        return 1
    fi
    cat "$errlog"
    local n
    for n in "${needles[@]}"; do
        grep -qF -- "$n" "$errlog" || { echo "stderr does not mention '$n'"; return 1; }
    done
    if [ -n "$(ls -A "$outdir")" ]; then
        echo "a failed run left files behind: $(ls -A "$outdir")"
        return 1
    fi
}

finish() {
    echo "$PASSED passed, $FAILED failed"
    if [ "$FAILED" -gt 0 ]; then
        printf 'failed: %s\n' "${FAILURES[@]}"
        exit 1
    fi
}
