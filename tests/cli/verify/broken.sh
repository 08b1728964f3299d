# A file that is not a model at all, a directory that is not a checkpoint.
ckptconv verify "$TESTDATA/torch" "$TESTDATA/torch"
echo "exit $?"
ckptconv verify nothing/here
echo "exit $?"
