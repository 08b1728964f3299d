#!/usr/bin/env bash
# ckptconv pd2te / te2pd on the real PaddleNLP fixtures (testdata/llama/): the numpy
# reference of the mapping computed in the test, real paddle.load of every output, te2pd
# round trips, a 128-layer checkpoint made with paddle.save, and every error path.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_venv "paddle, numpy"
export CKPTCONV
"$VENV_PYTHON" "$INTEROP_DIR/pd2te_check.py"
