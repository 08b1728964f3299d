# A distributed-optimizer checkpoint lists each parameter's optimizer state by name with its
# range per rank (grad buffer, bucket, start, end): the same ranges megatron-core's own
# buffers gave it, as the fixture generator dumped them (expected.json), for every fixture,
# legacy (distrib_optim.pt), torch_dist dp_reshardable and megatron-core 0.13.1's
# dp_zero_gather_scatter alike; a mixture of experts' under their global expert index.
for d in "$TESTDATA"/megatron/distopt/*/; do
  for form in legacy dp_reshardable dp_zero_gather_scatter; do
    test -d "$d/$form" || continue
    ckptconv inspect --json "$d/$form" | python3 -c '
import json, sys
exp = json.load(open(sys.argv[1] + "/expected.json"))
got = json.load(sys.stdin)["optimizer"]
want = set()
for r in exp["ranks"]:
    # the file of an EP rank is written by expert data-parallel rank 0: its expert buffers
    for b in r["buffers"]:
        if r["dp"] == 0 and not b.get("expert") or b.get("expert") and r.get("expert_dp", r["dp"]) == 0:
            for p in b["params"]:
                want.add((p["global_name"], r["tp"], r["pp"], b["model_chunk"], b["gbuf_index"], p["bucket"],
                          p["start"], p["end"]))
have = set((p["name"], p["tp"], p["pp"], p["chunk"], p["gbuf"], p["bucket"], p["start"], p["end"])
           for p in got["params"])
print(sys.argv[1].rstrip("/").split("/")[-1], sys.argv[2], got["kind"], len(have), "ranges",
      "match" if have == want else "DIFFER: %s" % sorted(have ^ want)[:3])' "$d" "$form"
  done
done
ckptconv inspect "$TESTDATA/megatron/distopt/b_tp2pp2dp1_bf16_tied/legacy"
