# SIGKILL in the middle of a conversion to one file leaves nothing beside the input: the
# output is written as an unnamed file (O_TMPFILE) until it is complete.
. "$CLI_DIR/kill.bash"
python3 "$CLI_DIR/make_big_hf.py" m 2
ckptconv convert m/model.safetensors out.pt -q &
pid=$!
kill_when_writing "$pid"
ls -A | grep -v "^\.bin$"
