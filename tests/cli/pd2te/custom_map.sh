# --map: a map of one's own, here a rename and a transpose; te2pd with the same --map runs
# it backwards. Names no rule matches pass through.
cat > m.json <<'JSON'
{ "ckptconv_map": 1, "name": "demo",
  "rules": [ { "from": "llama.layers.{L}.self_attn.o_proj.weight", "to": "blocks.{L}.out.weight",
               "ops": [{ "op": "transpose" }] } ] }
JSON
ckptconv pd2te --map m.json --dry-run "$TESTDATA/llama/bf16_pp51_last" out | grep -e o_proj -e blocks
ckptconv pd2te -q --map m.json "$TESTDATA/llama/bf16_pp51_last" te || exit 9
ckptconv te2pd -q --map m.json te back || exit 9
cmp "$TESTDATA/llama/bf16_pp51_last/config.json" back/config.json && echo config copied twice
ckptconv inspect back/model_state.tp00_pp50.pdparams | grep -c o_proj
