# Usage errors exit 2 and say what is wrong.
ckptconv verify
echo "exit $?"
ckptconv verify a b c
echo "exit $?"
ckptconv verify a --layers 3-1
echo "exit $?"
ckptconv verify a --device tpu
echo "exit $?"
ckptconv verify a --tokens 0
echo "exit $?"
ckptconv verify a --norm batchnorm
echo "exit $?"
ckptconv verify a --norm-eps -1
echo "exit $?"
ckptconv verify a --tol x
echo "exit $?"
