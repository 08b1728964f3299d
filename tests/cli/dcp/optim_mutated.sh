# Distributed-optimizer state whose files do not match what its args say is refused (exit 1),
# naming the file, the key or bucket and the numbers: a dp_reshardable bucket missing from
# .metadata; per-bucket numel objects that disagree with the layout args give (DP changed);
# a fully_reshardable save of a buffer of padded buckets whose moved parameter's saved master
# is not its weight (megatron-core's padded-offset slicing before Megatron-LM PR #5077); an
# unknown --optim-format.
src="$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/torch_dist"
ckptconv reshard -q "$src" dp --tp 2 --to torch_dist --optim-format dp_reshardable
cp -r dp nobucket
python3 - nobucket/iter_0000003/.metadata <<'PY'
import sys
p = sys.argv[1]
b = open(p, 'rb').read()
old = b'dp_group_idx_1.gbuf_idx_0.dtype_(torch.float32, torch.float32).bucket_idx_0.exp_avg_sq'
assert old in b
open(p, 'wb').write(b.replace(old, old[:-2] + b'xx'))
PY
ckptconv reshard -q nobucket out1 --tp 1 --to torch_dist 2>&1 || echo "exit $?"
cp -r dp dp3
python3 "$CLI_DIR/set_args.py" dp3/iter_0000003/common.pt data_parallel_size=3
ckptconv reshard -q dp3 out2 --tp 1 --to torch_dist 2>&1 || echo "exit $?"
# one element of the embedding's weight (or its saved master: the fp32 bytes of both are the
# same) changed in a fully_reshardable save whose first buckets are padded (TP 1, 5 buckets)
ckptconv reshard -q "$TESTDATA/megatron/distopt/a_tp2pp1dp2_buckets/legacy" fully --tp 1 --to torch_dist \
    --optim-format fully_reshardable
ckptconv convert -q fully/iter_0000003 fully.safetensors
python3 - fully.safetensors fully/iter_0000003/__0_0.distcp <<'PY'
import json, struct, sys
raw = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
a, b = json.loads(raw[8:8 + n])['embedding.word_embeddings.weight']['data_offsets']
w = raw[8 + n + a:8 + n + b]
data = bytearray(open(sys.argv[2], 'rb').read())
assert data.count(w) == 2
at = data.find(w)
data[at] ^= 1
open(sys.argv[2], 'wb').write(data)
PY
ckptconv reshard -q fully out3 --tp 2 --to torch_dist 2>&1 || echo "exit $?"
ckptconv reshard -q "$src" out4 --tp 1 --to torch_dist --optim-format dp 2>&1 || echo "exit $?"
