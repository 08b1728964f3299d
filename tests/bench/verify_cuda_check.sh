#!/usr/bin/env bash
# The CUDA backend against the CPU on a machine with a GPU, in one short run: build the CUDA
# module, test_backend_cuda and ckptconv, run the op-by-op comparison (attention with sliding
# windows 1, 3, 32, 64, 65 and >= tokens; geglu_tanh; everything else), then `verify` of each
# pair given (default: tiny fixtures of the families verify runs) once with --device cuda and
# once with --device cpu, and compare the two reports: both must pass, over the same entries.
#
#   tests/bench/verify_cuda_check.sh [A B]...   (pairs of checkpoints; default: see PAIRS)
# Environment: BUILD_DIR (default build-cuda), JOBS (default: all cores).
# Exit 0 when everything agrees; 1 naming what does not; 77 without a GPU.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BUILD_DIR:-$REPO/build-cuda}"
JOBS="${JOBS:-$(nproc)}"
T="$REPO/testdata"

if [ $# -ge 2 ]; then
    PAIRS=("$@")
else
    # head_dim 16 and up (the CUDA attention's sizes): llama_tiny; Gemma 3 (a window on 3 of 4
    # layers, GeGLU, sandwich norms, (1 + w) norms) where its fixture is there
    PAIRS=("$T/hf/llama_tiny" "$T/hf/llama_tiny")
    [ -d "$T/hf/transformers5/gemma3_tiny" ] && PAIRS+=("$T/hf/transformers5/gemma3_tiny" "$T/hf/transformers5/gemma3_tiny")
fi

cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCKPT_WITH_CUDA=ON > "$BUILD.configure.log"
cmake --build "$BUILD" -j"$JOBS" --target ckpt_cuda test_backend_cuda ckptconv > "$BUILD.build.log"

rc=0
"$BUILD/tests/test_backend_cuda" || rc=$?
if [ "$rc" = 77 ]; then
    echo "no GPU: nothing measured"
    exit 77
fi
[ "$rc" = 0 ] || echo "test_backend_cuda: exit $rc"

i=0
while [ $i -lt ${#PAIRS[@]} ]; do
    a=${PAIRS[$i]} b=${PAIRS[$((i + 1))]}
    i=$((i + 2))
    for dev in cuda cpu; do
        "$BUILD/ckptconv" verify "$a" "$b" --device "$dev" --json > "$BUILD/verify_$dev.json" 2>&1 || true
    done
    python3 - "$BUILD/verify_cuda.json" "$BUILD/verify_cpu.json" "$a" "$b" <<'EOF' || rc=1
import json, sys
try:
    g, c = (json.load(open(p)) for p in sys.argv[1:3])
except ValueError:
    sys.exit(f"{sys.argv[3]} vs {sys.argv[4]}: verify failed to run: " + open(sys.argv[1]).read()[:400])
names = lambda r: [e["name"] for e in r["layers"]]
ok = g["pass"] and c["pass"] and names(g) == names(c) and g["device"] != c["device"]
print(("ok  " if ok else "FAIL"), sys.argv[3], "vs", sys.argv[4], "|", g["device"], "pass", g["pass"],
      "|", c["device"], "pass", c["pass"])
sys.exit(0 if ok else 1)
EOF
done
exit $rc
