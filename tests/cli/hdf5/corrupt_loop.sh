# A flipped byte in a global heap (libhdf5 1.10.8 loops forever in H5HG_read): the walk is
# given up after its time limit, a one-line error naming the file as corrupt, exit 1.
python3 "$CLI_DIR/flip.py" "$TESTDATA/hdf5/keras.h5" k.h5 2360 137
timeout 120 ckptconv inspect k.h5
