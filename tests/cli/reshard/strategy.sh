# --strategy: the target from a Galvatron-style strategy file (uniform TP only).
set -e
printf '{"pp_size": 2, "tp_size_list": [2, 2, 2, 2]}' > s.json
ckptconv reshard "$TESTDATA/megatron/tp1" out --strategy s.json -q
ls out/iter_0000010
printf '{"pp_size": 1, "tp_size_list": [2, 1, 2, 2]}' > bad.json
ckptconv reshard "$TESTDATA/megatron/tp1" out2 --strategy bad.json || echo "exit $?"
