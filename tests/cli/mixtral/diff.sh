# diff reads a Mixtral Megatron checkpoint's experts at full shape across TP and PP ranks: the
# TP 2 PP 2 and TP 1 conversions differ only in the vocabulary padding (256 rows for TP 2, 128
# for TP 1), and mcore2hf's output is the source tensor for tensor.
src="$TESTDATA/hf/mixtral_tiny"
ckptconv hf2mcore "$src" a --tp 2 --pp 2 -q || exit 1
ckptconv hf2mcore "$src" b -q || exit 1
ckptconv mcore2hf a hf -q || exit 1
ckptconv diff a b | grep -E "shape |tensors:"
ckptconv diff "$src" hf | tail -2
