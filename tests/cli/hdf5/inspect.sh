# inspect shows each dataset's chunks, filter and compression ratio, and the file's total.
set -e
ckptconv convert -q --compress zstd "$TESTDATA/sample/tiny_llama.pt" m.h5
ckptconv inspect m.h5 | head -8
