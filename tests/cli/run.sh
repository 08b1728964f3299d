#!/usr/bin/env bash
# CLI tests: run tests/cli/<suite>/<case>.sh against the real binary. Usage: run.sh CKPTCONV [filter]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec python3 "$here/run.py" "$@"
