# hf2mcore --ep/--etp: a dense model has no experts to split over EP ranks or cut over expert
# TP ranks; --ep 1 --etp = TP writes the dense model as ever.
ckptconv hf2mcore --help | grep -A1 -- '--ep N'
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" out --ep 2
echo "exit $?"
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" out --tp 2 --etp 1
echo "exit $?"
test ! -e out && echo "nothing written"
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" plain --tp 2 -q
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" ep1 --tp 2 --ep 1 --etp 2 -q
for f in plain/iter_*/mp_rank_*/*.pt; do cmp "$f" "ep1/${f#plain/}" || exit 1; done && echo "--ep 1 --etp 2: the same files"
