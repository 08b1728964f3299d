"""convertible.py DIR [FIXTURE]: copy testdata/hf/FIXTURE (default deepseek_v3_tiny) to DIR as the
model hf2mcore converts: num_experts_per_tok 4 (= 2 x topk_group, so that transformers and
Megatron score expert groups alike) and rms_norm_eps 1e-6 (transformers' own eps of the MLA
norms); the same weights. config.json is written as edit_json.py writes it. The standard
library only."""
import json
import os
import shutil
import stat
import sys

dst = sys.argv[1]
src = os.path.join(os.environ["TESTDATA"], "hf", sys.argv[2] if len(sys.argv) > 2 else "deepseek_v3_tiny")
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
for name in os.listdir(dst):
    path = os.path.join(dst, name)
    os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
cfg_path = os.path.join(dst, "config.json")
with open(cfg_path) as f:
    cfg = json.load(f)
cfg["num_experts_per_tok"] = 4
cfg["rms_norm_eps"] = 1e-6
with open(cfg_path, "w") as f:
    json.dump(cfg, f, indent=2)
