# An FP8 checkpoint that does not hold what its quantization_config says is refused, naming
# the file, the tensor and the reason, and nothing is written: an FP8 weight without its
# scale, a scale of another shape than its weight's blocks, a scale whose weight is not FP8,
# fmt e5m2, a block size that is no positive integer, another quant_method (as before).
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
tensor() { python3 "$CLI_DIR/edit_tensor.py" "$@"; }
fresh() {
    rm -rf in out
    cp -r "$TESTDATA/hf/transformers5/qwen3_fp8_tiny" in
    chmod -R u+w in
}
run() {
    ckptconv hf2mcore in out -q
    echo "exit $?"
    test ! -e out || echo "out written"
}
fresh
tensor in/model.safetensors remove model.layers.1.mlp.up_proj.weight_scale_inv
run
fresh
python3 - <<'PY'
import json, struct
path = "in/model.safetensors"
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
header["model.layers.0.self_attn.q_proj.weight_scale_inv"]["shape"] = [1]
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * (n - len(text))
open(path, "wb").write(data[:8] + text + data[8 + n:])
PY
run
fresh
tensor in/model.safetensors copy model.layers.0.self_attn.q_proj.weight_scale_inv model.norm.weight_scale_inv
run
fresh
edit in/config.json quantization_config/fmt e5m2
run
fresh
edit in/config.json quantization_config/weight_block_size '[128, 0]'
run
fresh
edit in/config.json quantization_config/quant_method gptq
run
