# A non-empty OUT needs --force; --force keeps foreign files.
set -e
mkdir out
touch out/notes.txt
ckptconv reshard "$TESTDATA/megatron/tp2" out --tp 1 -q || echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/tp2" out --tp 1 -q --force
ls out
