# Integer options take decimal digits in their range, nothing else: no sign, no junk after
# them, and no value that would overflow (which used to wrap into "TP -1").
M="$TESTDATA/megatron/tp2"
for v in 18446744073709551617 2147483648 -1 +2 2x "" 0x10; do
    ckptconv reshard "$M" out --tp "$v" -q
    echo "reshard --tp '$v' exit $?"
done
ckptconv reshard "$M" out --pp 4294967297 -q; echo "exit $?"
ckptconv reshard "$M" out --vpp 2147483649 -q; echo "exit $?"
ckptconv reshard "$M" out --iteration 9223372036854775808 -q; echo "exit $?"
ckptconv reshard "$M" out --padded-vocab-size 4294967296 -q; echo "exit $?"
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" out --tp 2147483648 -q; echo "exit $?"
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" out --iteration -5 -q; echo "exit $?"
ckptconv mcore2hf "$M" out --iteration 18446744073709551617 -q; echo "exit $?"
ckptconv mcore2hf "$M" out --true-vocab-size 1e3 -q; echo "exit $?"
ckptconv hf2paddle "$TESTDATA/hf/llama_tiny" out --pp 18446744073709551617 -q; echo "exit $?"
ckptconv pd2te "$TESTDATA/paddlenlp/fp32_tp2" out --tp 4294967298 -q; echo "exit $?"
ckptconv te2pd in out --num-attention-heads 18446744073709551648 -q; echo "exit $?"
ckptconv verify "$M" --tokens 18446744073709551617; echo "exit $?"
ckptconv verify "$M" --seed 18446744073709551617; echo "exit $?"
ckptconv verify "$M" --layers 0,9223372036854775807; echo "exit $?"
ckptconv verify "$M" --hidden-size 4294967296; echo "exit $?"
ckptconv convert "$TESTDATA/sample/tiny_llama.pt" x.pdparams --protocol 4x; echo "exit $?"
ckptconv convert "$TESTDATA/sample/tiny_llama.pt" x.pt --threads 4294967297; echo "exit $?"
ls -A
