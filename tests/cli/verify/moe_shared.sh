# A MoE model with a shared expert (megatron-core's, testdata/megatron/moe_shared_tp1): its
# reshard to TP 2 runs as the ranks run it and passes; a copy whose layer 1 shared expert's
# fc2 is zeroed fails, exit 1, naming the shared expert and no routed one.
src="$TESTDATA/megatron/moe_shared_tp1"
ckptconv reshard "$src" tp2 --tp 2 -q
ckptconv verify "$src" tp2 --device cpu --tokens 16 -q
echo "exit $?"
cp -r "$src" zeroed
chmod -R u+w zeroed
f=zeroed/iter_0000001/mp_rank_00/model_optim_rng.pt
ckptconv convert "$f" ref.safetensors -q
python3 "$CLI_DIR/mutate_tensor.py" "$f" ref.safetensors zero model/decoder.layers.1.mlp.shared_experts.linear_fc2.weight
ckptconv verify tp2 zeroed --device cpu --tokens 16 --json | python3 -c '
import json, sys
o = json.load(sys.stdin)
print(o["pass"], o["first_failure"], o["failing_parts"])
print([(l["name"], l["part"]) for l in o["layers"] if l.get("part") == "shared expert"])'
