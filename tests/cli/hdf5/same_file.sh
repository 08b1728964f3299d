# An HDF5 input is never replaced by its own conversion (it used to lose its root
# attributes): a usage error (2), and its bytes stay as they were.
cp "$TESTDATA/hdf5/keras.h5" X.h5
before=$(sha256sum < X.h5)
ckptconv convert X.h5 X.h5 --force
echo "exit $?"
ckptconv convert X.h5 X.h5 --force --compress zstd
echo "exit $?"
[ "$(sha256sum < X.h5)" = "$before" ] && echo "input unchanged"
ls -A
