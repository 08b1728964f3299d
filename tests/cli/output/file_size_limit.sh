# Past the file size limit (ulimit -f, in KiB) a write fails instead of the process being
# killed by SIGXFSZ: exit 1 naming the output and the reason, and no temporary is left.
T="$TESTDATA/sample/tiny_llama.pt"
bash -c 'ulimit -f 100; exec ckptconv convert "$1" big.safetensors -q' _ "$T"
echo "exit $?"
bash -c 'ulimit -f 100; exec ckptconv convert "$1" big.pt.zst --compress-level 1 -q' _ "$T"
echo "exit $?"
bash -c 'ulimit -f 20; exec ckptconv hf2mcore "$1" out -q' _ "$TESTDATA/hf/llama_tiny"
echo "exit $?"
ls -A
