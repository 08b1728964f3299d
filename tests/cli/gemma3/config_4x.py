"""config_4x.py check WANT GOT: GOT (a config.json ckptconv wrote) is laid out as save_pretrained
lays it out, and is WANT (the one transformers 5 wrote, but its transformers_version) plus
exactly the keys transformers 4.5x reads Gemma 3's RoPE, layers and dtype from; prints those.

config_4x.py split GOT DIR4 DIR5: GOT as transformers 4.5x spells it (without 5's
rope_parameters and dtype) into DIR4/config.json, and as 5 does (without the 4.5x keys) into
DIR5/config.json."""
import json
import os
import sys

KEYS_4X = ["rope_local_base_freq", "rope_scaling", "rope_theta", "sliding_window_pattern", "torch_dtype"]
KEYS_5 = ["dtype", "rope_parameters"]


def write(cfg, d):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


if sys.argv[1] == "check":
    with open(sys.argv[2]) as f:
        want = json.load(f)
    with open(sys.argv[3]) as f:
        text = f.read()
    got = json.loads(text)
    if text != json.dumps(got, indent=2, sort_keys=True) + "\n":
        sys.exit("not laid out as save_pretrained lays it out")
    del want["transformers_version"]
    missing = [k for k in KEYS_4X if k not in got]
    if missing:
        sys.exit(f"no {', '.join(missing)}")
    extra = {k: got.pop(k) for k in KEYS_4X}
    if got != want:
        sys.exit(f"differs from transformers 5's in {sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))}")
    for k, v in extra.items():
        print(k, json.dumps(v, sort_keys=True))
else:
    with open(sys.argv[2]) as f:
        cfg = json.load(f)
    write({k: v for k, v in cfg.items() if k not in KEYS_5}, sys.argv[3])
    write({k: v for k, v in cfg.items() if k not in KEYS_4X}, sys.argv[4])
