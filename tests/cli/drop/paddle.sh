# paddle2hf and reshard of a PaddleNLP directory: a tensor of the model files no layout rule of
# PaddleNLP's LLaMA takes is refused, naming it; --drop leaves it out and the report lists it.
# The extra tensor (a copy of llama.norm.weight) is added to both TP ranks' .pdparams pickles.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2/"* in/
for f in in/model_state.tp00.pdparams in/model_state.tp01.pdparams; do
    python3 "$CLI_DIR/add_pdparams_tensor.py" "$f" llama.norm.weight llama.extra.weight
done
ckptconv paddle2hf in h 2>&1; echo "exit $?"
ckptconv reshard in r --tp 1 2>&1; echo "exit $?"
test ! -e h && test ! -e r
ckptconv paddle2hf in h --drop 'llama.extra.*' 2>&1 | sed 's/in [0-9.]* s$/in T s/'; echo "exit ${PIPESTATUS[0]}"
ckptconv paddle2hf in h2 --drop 'llama.extra.*' --dry-run --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["command"], r["dropped"], r["dry_run"])'
ckptconv reshard in r --tp 1 --drop 'llama.extra.*' 2>&1 | sed 's/in [0-9.]* s$/in T s/'; echo "exit ${PIPESTATUS[0]}"
ckptconv reshard in r2 --tp 1 --drop 'llama.extra.*' --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["command"], r["to"]["tp"], r["dropped"], r["optimizer"])'
ckptconv inspect r | grep -c extra || true
# a required tensor dropped is missing from the model, as any missing tensor is
ckptconv reshard in r3 --tp 1 --drop 'llama.extra.*' --drop lm_head.weight 2>&1; echo "exit $?"
