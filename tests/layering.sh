#!/bin/sh
# The engine (src/) and the public headers (include/) include nothing from formats/: the
# engine reaches format, layout and verify modules through <ckpt/sys/registry.h> only.
# Usage: layering.sh SOURCE_DIR [--self-test]. Prints each offending include and exits 1.
# --self-test also checks the tree, then plants such an include in a copy of src/ and fails
# unless the check catches it.
set -eu
root=$1

check() { # tree: the offending lines, exit status 1 when there are any
    if grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]*/)?formats/' \
        --include='*.c' --include='*.h' "$1/src" "$1/include"; then
        echo "layering: the engine and the public headers must not include formats/ (use <ckpt/sys/registry.h>)" >&2
        return 1
    fi
    return 0
}

check "$root"
if [ "${2:-}" = --self-test ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/include"
    cp -R "$root/src" "$work/src"
    printf '#include "../../formats/registry.h"\n' > "$work/src/graph/planted.c"
    if check "$work" > /dev/null 2>&1; then
        echo "layering: an include of formats/ planted in src/graph/planted.c went unnoticed" >&2
        exit 1
    fi
fi
