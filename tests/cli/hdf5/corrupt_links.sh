# A flipped byte in a group's links (libhdf5 1.10.8 once aborted on a double free reading
# them): a one-line error naming the file as corrupt, exit 1, no abort.
python3 "$CLI_DIR/flip.py" "$TESTDATA/hdf5/many_links.h5" m.h5 6331 114
ckptconv inspect m.h5
