# A distributed optimizer's state (real megatron-core runs) converted to the non-distributed
# optimizer's form (--to-optimizer plain) and back (--to-distributed-optimizer): every tensor
# of every rank file comes back bit for bit, also through another layout; the plain form has
# the same fp32 masters and moments by name (verify --optimizer), per-parameter state in
# Megatron's param-group order, and args that say which optimizer wrote it. The plain
# fixtures (real Megatron-LM, non-distributed) go to the distributed form and back the same.
set -e
D="$TESTDATA/megatron/distopt"
same() {
    n=0
    for f in "$1"/iter_*/mp_rank_*/*.pt; do
        rel=${f#"$1"/}
        ckptconv diff -q "$f" "$2/$rel" $4 || { echo "differs: $rel"; return 1; }
        n=$((n + 1))
    done
    echo "$3: $n rank files identical"
}
# args.use_distributed_optimizer of a rank file, from its pickle, and what its optimizer holds
args() {
    python3 - "$1" <<'PY'
import io, pickletools, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
out = io.StringIO()
pickletools.dis(z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0]), out)
ops = out.getvalue().split("\n")
at = next(i for i, l in enumerate(ops) if "'use_distributed_optimizer'" in l)
print(next(l.split()[2] for l in ops[at + 1:] if "NEWTRUE" in l or "NEWFALSE" in l))
PY
    ckptconv inspect --json "$1" | python3 -c '
import json, sys
print(json.load(sys.stdin)["metadata"]["optimizer"])'
}
# the same layout there and back (the bf16 run with tied embeddings over two stages)
ckptconv reshard -q "$D/b_tp2pp2dp1_bf16_tied/legacy" plain --to-optimizer plain
ckptconv verify -q "$D/b_tp2pp2dp1_bf16_tied/legacy" plain --optimizer --device cpu --tokens 4
args plain/iter_0000003/mp_rank_01_001/model_optim_rng.pt
ls plain/iter_0000003/mp_rank_01_001
ckptconv reshard -q plain back --to-distributed-optimizer
args back/iter_0000003/mp_rank_01_001/model_optim_rng.pt
same "$D/b_tp2pp2dp1_bf16_tied/legacy" back "b: distributed -> plain -> distributed"
rm -rf plain back
# through other layouts
ckptconv reshard -q "$D/a_tp2pp1dp2_buckets/legacy" plain --tp 1 --to-optimizer plain
ckptconv reshard -q plain back --tp 2 --dp 2 --to-distributed-optimizer
same "$D/a_tp2pp1dp2_buckets/legacy" back "a: TP 2 DP 2 distributed -> TP 1 plain -> TP 2 DP 2 distributed"
rm -rf plain back
ckptconv reshard -q "$D/c_tp1pp2dp1_vpp2/legacy" plain --pp 1 --to-optimizer plain
ckptconv reshard -q plain back --pp 2 --vpp 2 --to-optimizer distributed
same "$D/c_tp1pp2dp1_vpp2/legacy" back "c: PP 2 VPP 2 distributed -> PP 1 plain -> PP 2 VPP 2 distributed"
rm -rf plain back
ckptconv reshard -q "$TESTDATA/megatron/tp2pp2_bf16_optim" dist --tp 1 --pp 1 --dp 2 --to-distributed-optimizer
ls dist/iter_0000010/mp_rank_00
ckptconv verify -q "$TESTDATA/megatron/tp2pp2_bf16_optim" dist --optimizer --device cpu --tokens 4
ckptconv reshard -q dist back --tp 2 --pp 2 --to-optimizer plain
# (the rng states of ranks the middle layout lacks are not kept, as in any reshard)
same "$TESTDATA/megatron/tp2pp2_bf16_optim" back "plain TP 2 PP 2 -> distributed TP 1 DP 2 -> plain TP 2 PP 2" \
    "--exclude rng_state/*"
