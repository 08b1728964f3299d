# verify runs MoE layers (4 experts, top-2, EP 2): the EP 2 files against their reshards to
# EP 1 and to TP 2 pass, every expert and router compared on its own as well. Copies changed at test
# time fail, exit 1, naming what changed: two experts' fc1 swapped in the second EP rank's
# file (global experts 2 and 3), a router zeroed, an expert's fc2 written transposed, a
# router dropped from the reshard.
src="$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2/legacy"
ckptconv reshard "$src" ep1 --tp 1 --pp 1 --ep 1 --no-optimizer -q
ckptconv verify "$src" ep1 --device cpu --tokens 16 -q
echo "exit $?"
ckptconv verify "$src" ep1 --device cpu --tokens 16 --json | python3 -c '
import json, sys
o = json.load(sys.stdin)
print(o["pass"], [(l["name"], l.get("part"), l.get("expert")) for l in o["layers"] if l.get("index") == 1])'

# experts cut over TP 2 run as the ranks run them (column parts side by side, row parts
# summed), at EP 2 and, with PP 2, at EP 1
ckptconv reshard "$src" tp2ep2 --tp 2 --pp 1 --ep 2 --no-optimizer -q
ckptconv verify "$src" tp2ep2 --device cpu --tokens 16 -q
echo "exit $?"
ckptconv reshard "$src" tp2pp2 --tp 2 --pp 2 --ep 1 --no-optimizer -q
ckptconv verify tp2pp2 "$src" --device cpu --tokens 16 -q
echo "exit $?"

mutate() { # copy, rank file, op, tensors...
    rm -rf "$1"
    cp -r "$src" "$1"
    chmod -R u+w "$1"
    f="$1/iter_0000003/$2/model_optim_rng.pt"
    ckptconv convert "$f" ref.safetensors -q --force
    shift 2
    python3 "$CLI_DIR/mutate_tensor.py" "$f" ref.safetensors "$@"
}
mutate swapped mp_rank_00_001 swap model/decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight \
    model/decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight
ckptconv verify swapped ep1 --device cpu --tokens 16 -q
echo "exit $?"
ckptconv verify ep1 swapped --device cpu --tokens 16 --json | python3 -c '
import json, sys
o = json.load(sys.stdin)
print(o["pass"], o["first_failure"], o["failing_parts"])'

mutate router mp_rank_00_000 zero model/decoder.layers.1.mlp.router.weight
ckptconv verify ep1 router --device cpu --tokens 16 -q
echo "exit $?"

mutate transposed mp_rank_00_000 transpose model/decoder.layers.1.mlp.experts.local_experts.1.linear_fc2.weight
ckptconv verify ep1 transposed --device cpu --tokens 16 > table.txt
echo "exit $?"
grep -E "FAIL" table.txt | sed -E 's/ +[-+0-9.e]+ +[-+0-9.e]+ +[-+0-9.]+  FAIL$/ FAIL/'

ckptconv reshard "$src" norouter --tp 1 --pp 1 --ep 1 --no-optimizer --drop 'decoder.layers.1.mlp.router.weight' -q
ckptconv verify ep1 norouter --device cpu --tokens 16 -q
echo "exit $?"
