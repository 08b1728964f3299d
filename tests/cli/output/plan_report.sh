# Every job that writes a plan gives one JSON report with the same keys, with --dry-run too
# (which used to print text for hf2mcore and mcore2hf, whose "files" was a count).
H="$TESTDATA/hf/llama_tiny"
M="$TESTDATA/megatron/tp2"
P="$TESTDATA/paddlenlp/fp32_tp2"
check() {
    python3 -c '
import json, sys
r = json.load(sys.stdin)
shared = ["dry_run", "files", "tensors", "bytes", "dropped"] + ([] if r["dry_run"] else ["bytes_written", "seconds"])
missing = [k for k in shared + ["command", "input", "output"] if k not in r]
f = r["files"][0]
print(r["command"], "dry-run" if r["dry_run"] else "run", "missing:", missing, "files:", type(r["files"]).__name__,
      sorted(f), r["tensors"] == sum(x["tensors"] for x in r["files"]))'
}
for dry in --dry-run ""; do
    ckptconv hf2mcore "$H" a$dry --tp 2 --json $dry | check
    ckptconv mcore2hf "$M" b$dry --json $dry | check
    ckptconv reshard "$M" c$dry --tp 1 --json $dry | check
    ckptconv reshard "$P" d$dry --tp 1 --json $dry | check
    ckptconv paddle2hf "$P" e$dry --json $dry | check
    ckptconv hf2paddle "$H" f$dry --tp 2 --json $dry | check
    ckptconv pd2te "$P" g$dry --tp 1 --json $dry | check
    ckptconv zero-to-fp32 "$TESTDATA/zero/stage3_fp32_ws2" h$dry --json $dry | check
    ckptconv pd2te "$P" j$dry --json $dry | check
done
