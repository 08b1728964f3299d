# Gemma 3's layers of two kinds through Megatron's window_attn_skip_freq and back: an
# every-Nth-layer pattern is the integer N, any other mix a list with 1 where the layer uses
# the window (megatron-core's is_layer_window_attention), and a config.json with only
# transformers 4's sliding_window_pattern gets its layer_types from it. The weights come back
# byte for byte and config.json says the same layers, in layer_types and, for transformers
# 4.50-4.52 (which read no layer_types), as the sliding_window_pattern N that says them (past
# the last layer when none is full; left out for a mix no N says, which mcore2hf's report
# notes).
src="$TESTDATA/hf/transformers5/gemma3_tiny"
edit() { python3 "$CLI_DIR/../hf/edit_json.py" in/config.json "$@"; }
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
d = U(z.open([n for n in z.namelist() if n.endswith("data.pkl")][0])).load()
a = d["args"].__dict__
print("window_size", a["window_size"], "window_attn_skip_freq", a["window_attn_skip_freq"])' \
        mc/iter_0000001/mp_rank_00/model_optim_rng.pt
}
try() {
    rm -rf in mc hf && cp -r "$src" in
    while [ $# -gt 1 ]; do
        edit "$1" "$2"
        shift 2
    done
    ckptconv hf2mcore in mc -q && args && ckptconv mcore2hf mc hf -q && cmp in/model.safetensors hf/model.safetensors &&
        python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(c["layer_types"], "sliding_window_pattern", c.get("sliding_window_pattern", "(none)"))' hf/config.json
    echo "exit $?"
}
try
try layer_types '["sliding_attention", "full_attention", "sliding_attention", "full_attention"]'
try layer_types '["full_attention", "sliding_attention", "sliding_attention", "full_attention"]'
try layer_types '["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention"]'
try layer_types --delete _sliding_window_pattern --delete sliding_window_pattern 3
# mcore2hf's report: a note for the mix only (transformers 4.50-4.52 cannot read it)
notes() {
    rm -rf in mc hf && cp -r "$src" in
    [ $# -eq 0 ] || edit layer_types "$1"
    ckptconv hf2mcore in mc -q && ckptconv mcore2hf mc hf 2>&1 | grep '^note:'
    echo "notes: exit $?"
}
notes
notes '["full_attention", "sliding_attention", "sliding_attention", "full_attention"]'
