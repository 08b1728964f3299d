# shellcheck shell=bash
# cut_run NAME WHEN ARGS...: `ckptconv ARGS` while the input file NAME (its path in the case's
# directory: never a fixture in testdata/) is cut
# short WHEN (map, opened or read: see cut_short.c, preloaded from $CKPT_CUT_SHORT). Prints
# the exit status, then the error if it names a file that ended while being read, else all
# of stderr; then what is left in the directory besides the inputs named by INPUTS.
cut_run() {
    local name=$1 when=$2 rc=0
    shift 2
    [ -f "${CKPT_CUT_SHORT:-}" ] || { echo "no preload library at CKPT_CUT_SHORT=${CKPT_CUT_SHORT:-} (build the tests)"; return 1; }
    CKPT_CUT_FILE=$name CKPT_CUT_AT=$when LD_PRELOAD=$CKPT_CUT_SHORT \
        ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 ckptconv "$@" >/dev/null 2>err || rc=$?
    echo "exit $rc"
    grep -o "$name: file ends at offset [0-9]* while being read (changed on disk?)" err |
        sed 's/offset [0-9]*/offset N/' | grep . || cat err
    rm err
    ls -A | grep -vxF -f <(printf "%s\n" $INPUTS .bin) || true
}
