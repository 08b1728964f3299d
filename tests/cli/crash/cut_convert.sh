# convert: a safetensors input cut short at its first large read (tensor data), and a
# .pdparams cut short once opened: an error naming the file, and no output.
. "$CLI_DIR/cut.bash"
INPUTS="m pd"
python3 "$CLI_DIR/make_big_hf.py" m 1
cut_run m/model.safetensors read convert m/model.safetensors out.pt
cp -r "$TESTDATA/llama/fp32_tp1" pd
cut_run pd/model_state.pdparams opened convert pd/model_state.pdparams out.safetensors
