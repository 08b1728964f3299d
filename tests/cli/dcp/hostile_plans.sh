# The save plans megatron-core keeps in .metadata (torch 2.15) are data: the same place naming
# a class outside DCP's planner, or code, is refused by inspect, reshard and mcore2hf alike;
# nothing is written. The pickle is edited with its lengths kept (a shorter name, then NONE
# POP pairs that leave the stack as it was).
edit() {
  python3 -c '
import os, sys
p, pairs = sys.argv[1] + "/iter_0000010/.metadata", sys.argv[2:]
data = open(p, "rb").read()
for a, b in zip(pairs[::2], pairs[1::2]):
    a, b = os.fsencode(a), os.fsencode(b)
    assert len(a) == len(b) and a in data
    data = data.replace(a, b, 1)
open(p, "wb").write(data)' "$@"
}
cp -r "$TESTDATA/megatron/dist215_tp2" other_class
edit other_class $'\x8c\x08SavePlan' $'\x8c\x08SavePlaX'
cp -r "$TESTDATA/megatron/dist215_tp2" code
edit code $'\x8c\x24torch.distributed.checkpoint.planner' $'\x8c\x02os'"$(printf 'N0%.0s' $(seq 17))" \
  $'\x8c\x08SavePlan' $'\x8c\x06systemN0'
for case in other_class code; do
  ckptconv inspect "$case" > /dev/null
  echo "inspect exit $?"
  ckptconv reshard -q "$case" out --tp 1 --no-optimizer
  echo "reshard exit $?"
  ckptconv mcore2hf -q "$case" out
  echo "mcore2hf exit $?"
done
ls
