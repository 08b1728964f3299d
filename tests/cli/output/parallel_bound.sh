# --tp, --pp and --vpp have one bound in every command (1 to 1048576) and one message; a format
# with a smaller limit says so itself, past the option parsing.
M="$TESTDATA/megatron/tp2"
H="$TESTDATA/hf/llama_tiny"
P="$TESTDATA/paddlenlp/fp32_tp2"
for opt in --tp --pp; do
    ckptconv reshard "$M" out $opt 1048577 -q; echo "reshard $opt exit $?"
    ckptconv hf2mcore "$H" out $opt 1048577 -q; echo "hf2mcore $opt exit $?"
    ckptconv hf2paddle "$H" out $opt 1048577 -q; echo "hf2paddle $opt exit $?"
    ckptconv pd2te "$P" out $opt 1048577 -q; echo "pd2te $opt exit $?"
    ckptconv te2pd "$P" out $opt 0 -q; echo "te2pd $opt exit $?"
done
ckptconv reshard "$M" out --vpp 1048577 -q; echo "reshard --vpp exit $?"
ckptconv hf2mcore "$H" out --vpp 1048577 -q; echo "hf2mcore --vpp exit $?"
ckptconv hf2paddle "$H" out --tp 1048576 -q 2>&1 | sed "s|$TESTDATA|TESTDATA|"; echo "hf2paddle --tp 1048576 exit ${PIPESTATUS[0]}"
ls -A
