# SIGKILL in the middle of a conversion to a directory leaves its staging directory, named
# after the process; the next run writing the same output removes it and says so.
. "$CLI_DIR/kill.bash"
python3 "$CLI_DIR/make_big_hf.py" m 2
ckptconv hf2mcore m out --tp 2 -q &
pid=$!
kill_when_writing "$pid"
ls -A | sed -n "s/^\.out\.ckptconv-[0-9a-f]\{16\}-$pid-.*/staging directory of pid \$pid/p"
ckptconv hf2mcore m out --tp 2 2>&1 | sed -n "s/^note: removed .*\/\.out\.ckptconv-.*, left by an interrupted run (pid $pid)$/note: removed the staging directory of pid \$pid/p"
ls -A | grep -v "^\.bin$"
ls out
