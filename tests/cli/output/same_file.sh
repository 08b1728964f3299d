# The output may never be the input, by its own name, a hard link or a symbolic link,
# --force or not: a usage error (2), and the input's bytes stay as they were.
cp "$TESTDATA/sample/tiny_llama.pt" X.pt
ln X.pt hard.pt
ln -s X.pt sym.pt
before=$(sha256sum < X.pt)
ckptconv convert X.pt X.pt --force
echo "exit $?"
ckptconv convert X.pt X.pt --force --dtype bfloat16
echo "exit $?"
ckptconv convert X.pt X.pt
echo "exit $?"
ckptconv convert X.pt hard.pt --force
echo "exit $?"
ckptconv convert X.pt sym.pt --force
echo "exit $?"
ckptconv convert sym.pt ./X.pt --force
echo "exit $?"
[ "$(sha256sum < X.pt)" = "$before" ] && echo "input unchanged"
ls -A
