# A flipped byte in the root group's attributes (libhdf5 1.10.8 once crashed in H5A__close
# reading them): a one-line error naming the file as corrupt, exit 1, no crash.
python3 "$CLI_DIR/flip.py" "$TESTDATA/hdf5/plain.h5" p.h5 1209 9
ckptconv inspect p.h5
