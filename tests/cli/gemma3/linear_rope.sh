# Gemma 3 with the RoPE of gemma-3-4b/12b/27b (linear scaling by 8 of the full-attention
# layers only), as transformers 5.24 (rope_parameters per layer type) and 4.53 (rope_scaling
# beside rope_theta and rope_local_base_freq) wrote it, to Megatron at TP 2 PP 2 and back:
# every tensor byte for byte, the factor in the args as hf_rope_scaling_factor (Megatron-LM's
# llama3 use_rope_scaling and rope_scaling_factor as for any Gemma 3), and from either
# spelling the config.json transformers 5 wrote (all but transformers_version) plus exactly
# the keys transformers 4.5x reads the same RoPE and layers from (which 4.5x would otherwise
# miss, loading an unscaled model without a word), each spelling alone reading back as the
# same config; verify finds both sides equal to the source layer by layer. inspect's note on
# the source names the scaling.
set -e
args() {
    python3 -c '
import pickle, sys, zipfile
class A(dict):
    def __init__(self, *a, **k): dict.__init__(self)
    def __setstate__(self, s): self.__dict__.update(s if isinstance(s, dict) else {})
class U(pickle.Unpickler):
    def find_class(self, m, n):
        return A if not m.startswith("builtins") else super().find_class(m, n)
    def persistent_load(self, pid): return None
z = zipfile.ZipFile(sys.argv[1])
a = U(z.open([n for n in z.namelist() if n.endswith("data.pkl")][0])).load()["args"].__dict__
for k in ("hf_rope_scaling_factor", "use_rope_scaling", "rope_scaling_factor", "rotary_base", "hf_rope_local_base_freq",
          "window_attn_skip_freq"):
    print(k, a.get(k, "(none)"))' "$1"
}
want="$TESTDATA/hf/transformers5/gemma3_linear_tiny/config.json"
for m in transformers5/gemma3_linear_tiny gemma3_linear_tiny; do
    src="$TESTDATA/hf/$m"
    echo "== $m"
    ckptconv inspect "$src" | tail -n 1
    ckptconv hf2mcore "$src" mc --tp 2 --pp 2 -q
    args mc/iter_0000001/mp_rank_01_001/model_optim_rng.pt
    ckptconv mcore2hf mc hf -q
    cmp "$src/model.safetensors" hf/model.safetensors
    python3 "$CLI_DIR/config_4x.py" check "$want" hf/config.json
    python3 "$CLI_DIR/config_4x.py" split hf/config.json in4 in5
    for d in in4 in5; do
        cp "$src/model.safetensors" $d/
        ckptconv hf2mcore $d $d.mc -q
        ckptconv mcore2hf $d.mc $d.hf -q
        cmp hf/config.json $d.hf/config.json
    done
    ckptconv verify "$src" mc -q
    ckptconv verify "$src" hf -q
    rm -rf mc hf in4 in5 in4.mc in5.mc in4.hf in5.hf
done
