# What a killed run left in a directory (a named temporary or a staging directory, named
# after its process) is removed by the next run that writes anything into that directory,
# once that process is gone; a live process's is left alone.
python3 - <<'PY'
import os, socket
h = 2166136261
for b in socket.gethostname().encode():
    h = ((h ^ b) * 16777619) & 0xffffffff
boot = open("/proc/sys/kernel/random/boot_id").read().replace("-", "")[:8]
owner = "%08x%s" % (h, boot)
shell = os.getppid()  # the test script's shell: alive while this runs
start = open("/proc/%d/stat" % shell).read().rsplit(")", 1)[1].split()[19]
dead = os.fork()
if dead == 0:
    os._exit(0)
os.waitpid(dead, 0)
open(".o.h5.ckptconv-%s-%d-12345-dead01" % (owner, dead), "w").write("x" * 1000)
os.mkdir(".x.ckptconv-%s-%d-12345-dead02" % (owner, dead))
open(".x.ckptconv-%s-%d-12345-dead02/half.pt" % (owner, dead), "w").write("x")
open(".o.h5.ckptconv-%s-%d-%s-live01" % (owner, shell, start), "w").write("x")
PY
ls -A | sed 's/ckptconv-.*-\(dead0.\|live01\)$/ckptconv-\1/' | LC_ALL=C sort
ckptconv convert "$TESTDATA/sample/tiny_llama.pt" other.safetensors 2>&1 |
    sed -n 's/^note: removed \.\/\.\(.*\)\.ckptconv-.*-\(dead0.\), left by an interrupted run (pid [0-9]*)$/removed \1 \2/p' | LC_ALL=C sort
ls -A | sed 's/ckptconv-.*-\(dead0.\|live01\)$/ckptconv-\1/' | LC_ALL=C sort
