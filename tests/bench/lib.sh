# Shared by the benchmark scripts; sourced, not run. The script sets TIME (GNU time), OUT
# (a scratch directory), REPEAT, CKPTCONV and BASELINE (another ckptconv binary to compare
# with, or empty), and defines drop_caches before measuring; die and size_bytes are here.
#
# Figures: the fastest of REPEAT runs per tool, as WALL[name] (s), RSS[name] (GNU time's
# peak RSS, kB) and, for ckptconv and the baseline, ANON[name] / FILEB[name]: the peaks of
# RssAnon (its own buffers and heap) and RssFile (pages of mapped files, which the kernel
# can drop and read again) in /proc/PID/status, sampled every 50 ms (kB; a peak shorter
# than that can be missed, GNU time's figure cannot).

declare -A WALL RSS ANON FILEB

die() {
    echo "bench: $*" >&2
    exit 1
}

# size_bytes SIZE: the bytes of a size in ckptconv's syntax (512M, 2G, 1.5GiB, 3GB ...);
# fails on anything else.
size_bytes() {
    awk -v s="$1" 'BEGIN {
        n = s + 0; u = toupper(s); sub(/^[0-9.]+ */, "", u)
        m["" ] = 1; m["B"] = 1
        m["K"] = 2^10; m["KIB"] = 2^10; m["KB"] = 1e3
        m["M"] = 2^20; m["MIB"] = 2^20; m["MB"] = 1e6
        m["G"] = 2^30; m["GIB"] = 2^30; m["GB"] = 1e9
        m["T"] = 2^40; m["TIB"] = 2^40; m["TB"] = 1e12
        if (s !~ /^[0-9.]+ *[A-Za-z]*$/ || !(u in m)) exit 1
        printf "%.0f", n * m[u]
    }'
}


# run_sampled TIMELOG CMDLOG CMD...: CMD under GNU time (`%e %M` into TIMELOG, its output
# into CMDLOG) while its RssAnon / RssFile are sampled; sets S_ANON / S_FILE to the peaks
# (kB) and returns CMD's status. CMD must be the program itself, not a shell running it.
run_sampled() {
    local timelog="$1" cmdlog="$2"
    shift 2
    local tpid cpid k v rc=0
    S_ANON=0
    S_FILE=0
    "$TIME" -f '%e %M' -o "$timelog" "$@" >"$cmdlog" 2>&1 &
    tpid=$!
    while kill -0 "$tpid" 2>/dev/null; do
        cpid=""
        read -r cpid _ <"/proc/$tpid/task/$tpid/children" 2>/dev/null || true
        if [ -n "$cpid" ]; then
            while read -r k v _; do
                case $k in
                    RssAnon:) [ "$v" -gt "$S_ANON" ] && S_ANON=$v ;;
                    RssFile:) [ "$v" -gt "$S_FILE" ] && S_FILE=$v ;;
                esac
            done <"/proc/$cpid/status" 2>/dev/null || true
        fi
        sleep 0.05
    done
    wait "$tpid" || rc=$?
    return $rc
}

# measure_once NAME DEST CMD...: one run of CMD, page cache dropped first, DEST removed
# first (and made again as a directory when DEST ends in /); NAME keeps the figures of its
# fastest run so far. Names starting with ckptconv or baseline are sampled.
measure_once() {
    local name="$1" dest="$2"
    shift 2
    local log="$OUT/time.log" wall rss rc=0
    if [ -n "$dest" ]; then
        rm -rf "$dest"
        case $dest in */) mkdir -p "$dest" ;; esac
    fi
    drop_caches
    S_ANON=""
    S_FILE=""
    case $name in
        ckptconv* | baseline*) run_sampled "$log" "$OUT/cmd.log" "$@" || rc=$? ;;
        *) "$TIME" -f '%e %M' -o "$log" "$@" >"$OUT/cmd.log" 2>&1 || rc=$? ;;
    esac
    if [ "$rc" != 0 ]; then
        tail -n 30 "$OUT/cmd.log" >&2
        die "$name failed: $*"
    fi
    read -r wall rss <"$log"
    if [ -z "${WALL[$name]:-}" ] || awk -v a="$wall" -v b="${WALL[$name]}" 'BEGIN { exit !(a < b) }'; then
        WALL[$name]=$wall
        RSS[$name]=$rss
        ANON[$name]=$S_ANON
        FILEB[$name]=$S_FILE
    fi
}

# measure NAME DEST CMD...: REPEAT runs.
measure() {
    local i
    for ((i = 0; i < REPEAT; i++)); do
        measure_once "$@"
    done
}

# measure_ckptconv SUFFIX DEST ARGS...: REPEAT runs of `$CKPTCONV ARGS...` as
# ckptconv$SUFFIX, each after one of `$BASELINE ARGS...` as baseline$SUFFIX when BASELINE is
# set, so that both see the same drift of the disk. DEST keeps ckptconv's last output.
measure_ckptconv() {
    local sfx="$1" dest="$2" i
    shift 2
    for ((i = 0; i < REPEAT; i++)); do
        [ -z "$BASELINE" ] || measure_once "baseline$sfx" "$dest" "$BASELINE" "$@"
        measure_once "ckptconv$sfx" "$dest" "$CKPTCONV" "$@"
    done
}

# Tools measured for a table: ckptconv's baseline only when there is one.
with_baseline() {
    local t
    for t in "$@"; do
        [ "$t" != baseline ] || [ -n "$BASELINE" ] || continue
        echo "$t"
    done
}

# report_baseline [SUFFIX]: a line comparing baseline$SUFFIX with ckptconv$SUFFIX, if measured.
report_baseline() {
    local b="baseline${1:-}" c="ckptconv${1:-}"
    [ -n "$BASELINE" ] || return 0
    echo "baseline -> ckptconv: wall ${WALL[$b]} -> ${WALL[$c]} s ($(ratio "${WALL[$c]}" "${WALL[$b]}")x)," \
        "peak RSS $(mb "${RSS[$b]}") -> $(mb "${RSS[$c]}") MB," \
        "anonymous $(mb "${ANON[$b]}") -> $(mb "${ANON[$c]}") MB," \
        "file-backed $(mb "${FILEB[$b]}") -> $(mb "${FILEB[$c]}") MB"
}

# kB -> MB, one decimal; "-" for no figure
mb() { if [ -n "$1" ]; then awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; else echo -; fi; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# choose_cache: BENCH_CACHE=warm keeps the page cache (CPU cost only: with BENCH_REPEAT=2 or
# more, every tool's best run reads from memory); otherwise runs are cold when the page cache
# can be dropped (root). Sets CACHE (for the table) and defines drop_caches.
choose_cache() {
    if [ "${BENCH_CACHE:-cold}" = warm ]; then
        CACHE="warm (BENCH_CACHE=warm: page cache kept between runs)"
        drop_caches() { :; }
    elif ( sync && echo 3 >/proc/sys/vm/drop_caches ) 2>/dev/null; then
        CACHE="cold (page cache dropped before each run)"
        drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
    else
        echo "bench: cannot drop the page cache (needs root); runs are warm-cache"
        CACHE="warm (cannot drop the page cache without root)"
        drop_caches() { :; }
    fi
}

# check_baseline: refuse a BASELINE that is not an executable.
check_baseline() {
    [ -z "$BASELINE" ] || [ -x "$BASELINE" ] || die "BENCH_BASELINE=$BASELINE is not an executable ckptconv"
}

# megatron_bench_input DIR TEMPLATE GEN_ARGS: the Megatron-LM input of the reshard benchmarks
# (make_megatron_bench.py, TP2 PP2, bf16 with the plain optimizer's state), generated into DIR
# once and again only when the generator, its arguments or the template change. Needs REPO
# and TORCH_PYTHON.
megatron_bench_input() {
    local in="$1" template="$2" gen_args="$3" gen="$REPO/tests/bench/make_megatron_bench.py" id
    id="$( {
        echo "$gen_args"
        cat "$gen" "$REPO/tests/bench/megatron_ckpt.py"
        find "$template" -type f \( -name '*.pt' -o -name latest_checkpointed_iteration.txt \) -print0 \
            | sort -z | xargs -0 cat
    } | sha256sum | cut -c1-16)"
    if [ ! -f "$in/latest_checkpointed_iteration.txt" ] || [ "$(cat "$in.done" 2>/dev/null)" != "$id" ]; then
        echo "bench: generating $in (once)"
        rm -rf "$in" "$in.tmp" "$in.done"
        # shellcheck disable=SC2086
        "$TORCH_PYTHON" "$gen" "$in.tmp" --template "$template" $gen_args
        mv "$in.tmp" "$in"
        echo "$id" >"$in.done"
    fi
}

# hf_bench_input DIR GEN_ARGS [GENERATOR]: the Hugging Face input of the hf2mcore, paddle_hf and MoE benchmarks
# (GENERATOR, default make_hf_bench.py: LLaMA-shaped bf16 safetensors), generated into DIR once and again only when
# the generator or its arguments change. Needs REPO and a Python with numpy as VENV_PYTHON.
hf_bench_input() {
    local in="$1" gen_args="$2" gen="${3:-$REPO/tests/bench/make_hf_bench.py}" id
    id="$( {
        echo "$gen_args"
        cat "$gen"
    } | sha256sum | cut -c1-16)"
    if [ ! -f "$in/config.json" ] || [ "$(cat "$in.done" 2>/dev/null)" != "$id" ]; then
        echo "bench: generating $in (once)"
        rm -rf "$in" "$in.done"
        # shellcheck disable=SC2086
        "$VENV_PYTHON" "$gen" "$in" $gen_args
        echo "$id" >"$in.done"
    fi
}

# Die unless BENCH_DIR has room for N inputs' worth (SIZE bytes each) and 1 GiB more.
need_free_disk() {
    local free
    free=$(df -B1 --output=avail "$BENCH_DIR" | tail -1)
    [ "$free" -gt $(($1 * SIZE + (1 << 30))) ] \
        || die "$(($1 * SIZE / 1000000)) MB of free disk needed in $BENCH_DIR, $((free / 1000000)) MB free"
}

# hf_compare KEY KIND A B: records tests/bench/hf_compare.py's verdict in CHECK[KEY] (a
# DIFFERENT one sets failed=1), never stops the run.
hf_compare() {
    local key="$1" kind="$2" a="$3" b="$4" msg
    if msg=$("$TORCH_PYTHON" "$REPO/tests/bench/hf_compare.py" "$kind" "$a" "$b" 2>&1); then
        CHECK[$key]="ok: $msg"
    else
        CHECK[$key]="DIFFERENT: $msg"
        failed=1
    fi
}

# A target's line; a missed one sets missed=1, which BENCH_STRICT=1 turns into a failure.
missed=0
check_target() {
    local what="$1" ok="$2"
    if [ "$ok" = 1 ]; then echo "target met:    $what"; else echo "target MISSED: $what"; missed=1; fi
}

# Direction D (TITLE) of a two-way bench against a reference run as tool "ref": the table of
# every tool's wall time and peak RSS, the ratios, the output check and the targets (3x the
# reference's speed, anonymous RSS within --memory).
report_direction() {
    local d="$1" title="$2" tool
    echo
    echo "$d. $title"
    printf '%-10s %8s %12s %9s %9s %16s %15s\n' tool "wall s" "peak RSS MB" "anon MB" "file MB" "wall / ckptconv" \
        "RSS / ckptconv"
    for tool in $(with_baseline cp "cp+sync" baseline ckptconv ref); do
        printf '%-10s %8.2f %12s %9s %9s %16s %15s\n' "$tool" "${WALL[$tool:$d]}" "$(mb "${RSS[$tool:$d]}")" \
            "$(mb "${ANON[$tool:$d]}")" "$(mb "${FILEB[$tool:$d]}")" \
            "$(ratio "${WALL[$tool:$d]}" "${WALL[ckptconv:$d]}")" "$(ratio "${RSS[$tool:$d]}" "${RSS[ckptconv:$d]}")"
    done
    report_baseline ":$d"
    echo "ref / ckptconv:      wall $(ratio "${WALL[ref:$d]}" "${WALL[ckptconv:$d]}")x," \
         "peak RSS $(ratio "${RSS[ref:$d]}" "${RSS[ckptconv:$d]}")x"
    echo "ckptconv / cp+sync:  wall $(ratio "${WALL[ckptconv:$d]}" "${WALL[cp+sync:$d]}")x" \
         "(of cp: $(ratio "${WALL[ckptconv:$d]}" "${WALL[cp:$d]}")x)"
    echo "check: ${CHECK[$d]}"
    check_target "ckptconv at least 3x faster than the reference ($(ratio "${WALL[ref:$d]}" "${WALL[ckptconv:$d]}")x)" \
        "$(awk -v p="${WALL[ref:$d]}" -v c="${WALL[ckptconv:$d]}" 'BEGIN { print (p >= 3 * c) ? 1 : 0 }')"
    check_target "ckptconv anonymous peak RSS within --memory $MEMORY + ${RSS_ALLOWANCE_MB} MB" \
        "$(awk -v r="${ANON[ckptconv:$d]}" -v m="$MEMORY_BYTES" -v a="$RSS_ALLOWANCE_MB" \
            'BEGIN { print (r * 1024 <= m + a * 2^20) ? 1 : 0 }')"
}
