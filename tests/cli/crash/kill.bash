# shellcheck shell=bash
# kill_when_writing PID: SIGKILL the process once it has written 16 MB (so that it dies in
# the middle of its output, whatever the speed of the machine), then reap it.
kill_when_writing() {
    local pid=$1 i written
    for i in $(seq 400); do
        written=$(sed -n 's/^wchar: //p' "/proc/$pid/io" 2>/dev/null)
        [ -n "$written" ] || break
        [ "$written" -gt 16000000 ] && break
        sleep 0.025
    done
    kill -0 "$pid" 2>/dev/null && echo "still running when killed"
    kill -9 "$pid" 2>/dev/null
    wait "$pid"
    echo "exit $?"
}
