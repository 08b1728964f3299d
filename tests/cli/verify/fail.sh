# A layer over the tolerance fails the run, exit 1, and the first one is named.
ckptconv verify "$TESTDATA/megatron/tp1" "$TESTDATA/megatron/tp2" --device cpu --tokens 4 --tol 1e-30 --layers 2,3
echo "exit $?"
ckptconv verify "$TESTDATA/megatron/tp1" "$TESTDATA/megatron/tp2" --device cpu --tokens 4 --tol 1e-30 --layers 2 -q
echo "exit $?"
