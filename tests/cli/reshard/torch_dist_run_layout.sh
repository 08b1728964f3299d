# Without --tp/--pp/--vpp the target is the run's layout: a torch_dist IN stores global shapes,
# its args name the run's TP/PP/VPP (a legacy IN's are its rank files'); the summary and --json
# give the IN as that layout. A given --pp sets VPP to 1 unless --vpp is given.
d="$TESTDATA/megatron/distopt"
ckptconv reshard "$d/a_tp2pp1dp2_buckets/dp_reshardable" tp2 2>&1 | sed 's/ in [0-9.]* s$//'
ls tp2/iter_0000003
layout() {
    ckptconv reshard "$@" --dry-run --json | python3 -c \
        'import json, sys; d = json.load(sys.stdin); f, t = d["from"], d["to"]; print("from TP %d PP %d VPP %d -> TP %d PP %d VPP %d" % (f["tp"], f["pp"], f["vpp"], t["tp"], t["pp"], t["vpp"]))'
}
layout "$d/c_tp1pp2dp1_vpp2/dp_reshardable" o1
layout "$d/c_tp1pp2dp1_vpp2/legacy" o2
layout "$d/c_tp1pp2dp1_vpp2/dp_reshardable" o3 --tp 2
layout "$d/c_tp1pp2dp1_vpp2/dp_reshardable" o4 --pp 1
layout "$d/c_tp1pp2dp1_vpp2/dp_reshardable" o5 --pp 2 --vpp 2
layout "$d/a_tp2pp1dp2_buckets/dp_reshardable" o6 --to torch_dist
ckptconv reshard "$d/a_tp2pp1dp2_buckets/dp_reshardable" o7 --dry-run | head -1 | sed "s|$d/||"
