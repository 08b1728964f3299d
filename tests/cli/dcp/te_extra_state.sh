# Transformer Engine layers' _extra_state (an empty uint8 tensor since TE 2.0, as hf2mcore
# writes it) as torch_dist ShardedObjects, "<key>/shard_<layer>_<layers>" holding
# torch.save([tensor]) (megatron-core asks for them when it loads a TE model):
# legacy -> torch_dist -> legacy gives the source's files byte for byte at TP 1, TP 2 and for
# a MoE model at EP 2 (SequentialMLP and TEGroupedMLP experts, keyed per expert); --extra-state
# drop still leaves them out. An FP8 state (a non-empty tensor) is written; read back from
# torch_dist it is not, so copying it is refused, and --extra-state empty writes the model.
set -e
same() { (cd "$1" && find . -type f | sort) | while read -r f; do cmp "$1/$f" "$2/$f"; done; }
R=iter_0000001
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" mc1 -q
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" mc2 --tp 2 -q
ckptconv hf2mcore "$TESTDATA/hf/mixtral_tiny" mx --ep 2 -q
ckptconv hf2mcore "$TESTDATA/hf/mixtral_tiny" mg --ep 2 --moe-grouped-gemm -q
ckptconv reshard mc1 td1 --to torch_dist -q && ckptconv reshard td1 b1 --to torch -q && same mc1 b1
echo "== TP 1 -> torch_dist -> TP 1: the same files"
grep -ao "decoder.layers.[a-z_.]*_extra_state/shard_[0-9._]*" td1/$R/.metadata | sort -u | head -6
ckptconv reshard mc2 td2 --to torch_dist -q && ckptconv reshard td2 b2 --to torch -q && same mc2 b2
echo "== TP 2 -> torch_dist -> TP 2: the same files"
ckptconv reshard mx tdx --to torch_dist -q && ckptconv reshard tdx bx --to torch --ep 2 -q && same mx bx
echo "== mixtral EP 2 -> torch_dist -> EP 2: the same files"
ckptconv reshard mg tdg --to torch_dist -q && ckptconv reshard tdg bg --to torch --ep 2 --moe-grouped-gemm on -q &&
    same mg bg
for f in .metadata __0_0.distcp; do cmp tdx/$R/$f tdg/$R/$f; done
echo "== TEGroupedMLP EP 2 -> torch_dist (SequentialMLP's items) -> TEGroupedMLP: the same files"
ckptconv reshard mc1 dropped --to torch_dist --extra-state drop -q
echo "--extra-state drop: $(grep -aoc "_extra_state/shard" dropped/$R/.metadata) extra state items"
# an FP8 state: layer 1's linear_qkv extra state made 5 bytes
/usr/bin/python3 - mc1/$R/mp_rank_00/model_optim_rng.pt <<'PY'
import sys, torch
ck = torch.load(sys.argv[1])
ck["model"]["decoder.layers.1.self_attention.linear_qkv._extra_state"] = torch.arange(5, dtype=torch.uint8)
torch.save(ck, sys.argv[1])
PY
ckptconv reshard mc1 fp8 --to torch_dist -q
set +e
ckptconv reshard fp8 fb --to torch -q
echo "rc=$?"
ckptconv reshard fp8 fd --to torch_dist -q
echo "rc=$?"
set -e
ckptconv reshard fp8 fe --to torch --extra-state empty -q
cmp b1/$R/mp_rank_00/model_optim_rng.pt fe/$R/mp_rank_00/model_optim_rng.pt && echo "--extra-state empty: the empty states"
# a TEGroupedMLP linear's FP8 state is one for all its experts, which torch_dist splits per GEMM
/usr/bin/python3 - mg/$R/mp_rank_00_000/model_optim_rng.pt <<'PY'
import sys, torch
ck = torch.load(sys.argv[1])
ck["model"]["decoder.layers.0.mlp.experts.linear_fc1._extra_state"] = torch.arange(5, dtype=torch.uint8)
torch.save(ck, sys.argv[1])
PY
set +e
ckptconv reshard mg gfp8 --to torch_dist -q
echo "rc=$?"
set -e
ckptconv reshard mg gfe --to torch_dist --extra-state empty -q
cmp tdg/$R/.metadata gfe/$R/.metadata && echo "--extra-state empty: the empty states' items"
