# Two runs writing one output at once. Without --force the first to finish wins whole and the
# other fails, saying so; with --force both succeed and the output is one of them, whole.
# Never a file of both.
python3 "$CLI_DIR/make_big_hf.py" a 1 first
python3 "$CLI_DIR/make_big_hf.py" b 1 second
whose() { ckptconv inspect out.pt --json | python3 -c '
import json, sys
names = {t["name"].split(".")[0] for t in json.load(sys.stdin)["tensors"] if t["name"] != "lm_head.weight"}
print("whole, from", "one run" if len(names) == 1 else "BOTH RUNS", sorted(names) if len(names) > 1 else "")'; }
for force in "" --force; do
    rm -f out.pt
    ckptconv convert a/model.safetensors out.pt -q $force 2>err_a & pa=$!
    ckptconv convert b/model.safetensors out.pt -q $force 2>err_b & pb=$!
    wait $pa; ra=$?
    wait $pb; rb=$?
    echo "${force:-no --force}: exit statuses $(printf '%s\n' $ra $rb | sort | tr '\n' ' ')"
    cat err_a err_b | sed -n 's/.*out.pt: output \(appeared while it was being written\|already exists\).*/refused: output exists/p'
    whose
done
python3 "$CLI_DIR/make_big_hf.py" c 1
rm -rf out; ckptconv hf2mcore c out -q 2>err_a & pa=$!
ckptconv hf2mcore c out -q 2>err_b & pb=$!
wait $pa; ra=$?
wait $pb; rb=$?
echo "directories: exit statuses $(printf '%s\n' $ra $rb | sort | tr '\n' ' ')"
cat err_a err_b | sed -n 's/.*out\(: cannot move the output into place: it was filled meanwhile\| is not empty\).*/refused: output exists/p'
ls -A | grep -c ckptconv || true
