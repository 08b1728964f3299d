#!/usr/bin/env bash
# Pickles that would run code when loaded: convert must refuse them by default, naming the
# global and its key path, and leave no output; --drop-unknown-objects gives a file that
# torch.load(weights_only=True) accepts; --keep-unknown-objects carries the global through
# (checked by scanning the output's pickle, never by loading it). Nothing may ever run:
# every command runs in the temp dir, where the testdata/bad payloads would create PAYLOAD_RAN.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch
need_venv "safetensors, torch"

cd "$WORK"
SRC="$TESTDATA/torch/unsafe_os_system.pt"
EXP="$TESTDATA/torch/expected/unsafe_os_system.json"

# The global and key path the generator recorded (posix.system at extra/hook).
read -r GLOBAL KEYPATH < <("$TORCH_PYTHON" -c '
import json, sys
u = json.load(open(sys.argv[1]))["unsafe_globals"][0]
print(u["global"], u["path"])' "$EXP")

# globals_of FILE: the pickle globals of a torch zip, by scanning opcodes only.
globals_of() {
    "$TORCH_PYTHON" -c '
import sys
sys.path.insert(0, sys.argv[2])
import gen_common
print(" ".join(gen_common.pickle_globals(gen_common.zip_pickle(sys.argv[1]))))' "$1" "$TESTDATA/gen"
}

no_payload_ran() {
    if [ -n "$(find "$WORK" -name PAYLOAD_RAN)" ]; then
        echo "a payload ran: $(find "$WORK" -name PAYLOAD_RAN)"
        return 1
    fi
}

inspect_lists_it() {
    "$CKPTCONV" inspect --json "$SRC" >"$WORK/inspect.out"
    "$TORCH_PYTHON" - "$WORK/inspect.out" "$GLOBAL" "$KEYPATH" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
bad = [g for g in doc["globals"] if not g["known"]]
want = sys.argv[2].rsplit(".", 1)
assert [(g["module"], g["name"]) for g in bad] == [tuple(want)], bad
assert bad[0]["path"] == sys.argv[3] or bad[0]["path"].startswith(sys.argv[3] + "/"), bad[0]
assert [t["name"] for t in doc["tensors"]] == ["model/weight"], doc["tensors"]
PY
}

refused() {
    local to="$1" dir="$WORK/refuse-$1"
    mkdir -p "$dir"
    expect_refusal "$dir" "$WORK/refuse-$to.err" "$GLOBAL" "$KEYPATH" -- \
        "$CKPTCONV" convert "$SRC" "$dir/out.$to"
}

dropped() {
    local dir="$WORK/drop"
    mkdir -p "$dir"
    ckpt convert -q --drop-unknown-objects "$SRC" "$dir/out.pt" >"$WORK/drop.log" 2>&1
    case " $(globals_of "$dir/out.pt") " in
        *" $GLOBAL "*) echo "the dropped global is still in the output"; return 1 ;;
    esac
    torch_py weights_only "$dir/out.pt"
    torch_py expected "$dir/out.pt" "$EXP"
    ckpt convert -q --drop-unknown-objects "$SRC" "$dir/out.safetensors" >>"$WORK/drop.log" 2>&1
    st_py expected "$dir/out.safetensors" "$EXP"
}

kept() {
    local dir="$WORK/keep"
    mkdir -p "$dir"
    ckpt convert -q --keep-unknown-objects "$SRC" "$dir/out.pt" >"$WORK/keep.log" 2>&1
    case " $(globals_of "$dir/out.pt") " in
        *" $GLOBAL "*) ;;
        *) echo "--keep-unknown-objects lost $GLOBAL: $(globals_of "$dir/out.pt")"; return 1 ;;
    esac
    # The tensor survives too; read back through our own reader, never through pickle.
    "$CKPTCONV" inspect --json "$dir/out.pt" | "$TORCH_PYTHON" -c '
import json, sys
doc = json.load(sys.stdin)
assert [t["name"] for t in doc["tensors"]] == ["model/weight"], doc["tensors"]
assert any(not g["known"] and g["module"] + "." + g["name"] == sys.argv[1] for g in doc["globals"])' "$GLOBAL"
}

# Hostile inputs built without torch (testdata/bad): refused with their key path.
bad_refused() {
    local name="$1" global="$2" dir="$WORK/bad-$1"
    mkdir -p "$dir"
    expect_refusal "$dir" "$WORK/bad-$name.err" "$global" "state/hook" -- \
        "$CKPTCONV" convert "$TESTDATA/bad/$name" "$dir/out.pt"
}

case_run "inspect names $GLOBAL at $KEYPATH" inspect_lists_it
case_run "convert to .pt refuses" refused pt
case_run "convert to .safetensors refuses" refused safetensors
case_run "convert to .pdparams refuses" refused pdparams
case_run "--drop-unknown-objects: weights_only loads it" dropped
case_run "--keep-unknown-objects carries $GLOBAL (scanned, not loaded)" kept
case_run "bad/unsafe.pt (builtins.eval) refused" bad_refused unsafe.pt eval
case_run "bad/unsafe_p4.pt (posix.system by STACK_GLOBAL) refused" bad_refused unsafe_p4.pt posix.system
case_run "no payload ran" no_payload_ran
finish
