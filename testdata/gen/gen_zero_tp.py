"""Tensor-parallel DeepSpeed checkpoint fixtures (testdata/zero/tp2_*), made from two
committed single-rank fixtures of the same stage, dtype and world size:

  gen_zero_tp.py OUT_CASE_DIR MP0_CASE_DIR MP1_CASE_DIR

With tensor parallelism DeepSpeed's engine writes, per model-parallel rank MM, the same
files as without it under names carrying that rank (`mp_rank_MM_model_states.pt`,
`zero_pp_rank_D_mp_rank_MM_optim_states.pt`, and for stage 3
`zero_pp_rank_D_mp_rank_MM_model_states.pt`), and records `mp_world_size` and
`checkpoint_parallel_dimensions` in every model-states file. Training a real tensor-parallel
model needs a model-parallel unit (Megatron) that does not run on the CPU here, so this
script builds the layout from real files instead: every file of MP0_CASE_DIR/global_step3
becomes the mp_rank_00 file, every file of MP1_CASE_DIR/global_step3 the mp_rank_01 file,
loaded and saved again with torch.save (the archive inside each zip is named after the new
file, as torch.save names it) with mp_world_size = 2 and tp_degree = 2. Nothing else
changes, so the consolidated output of rank MM must equal DeepSpeed's own zero_to_fp32
output of the source case (OUT_CASE_DIR/sources.json names them).

Needs a python with torch and deepspeed (the pickles reference DeepSpeed classes); the
versions of README_zero.md wrote the committed files. testdata/gen/run_zero_extra.sh runs it.
"""
import json
import os
import shutil
import sys


def resave(src, dst, mp_world_size):
    import torch

    obj = torch.load(src, map_location="cpu", weights_only=False)
    if "mp_world_size" in obj:
        obj["mp_world_size"] = mp_world_size
        dims = obj.get("checkpoint_parallel_dimensions")
        if isinstance(dims, dict):
            dims["tp_degree"] = mp_world_size
    torch.save(obj, dst)


def main(out, mp0, mp1):
    tag = "global_step3"
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, tag))
    with open(os.path.join(mp0, "latest")) as f:
        latest = f.read()
    with open(os.path.join(out, "latest"), "w") as f:
        f.write(latest)
    for mp, case in enumerate((mp0, mp1)):
        for name in sorted(os.listdir(os.path.join(case, tag))):
            if "mp_rank_00" not in name:
                sys.exit(f"{case}/{tag}/{name}: not a model-parallel rank 0 file")
            new = name.replace("mp_rank_00", f"mp_rank_{mp:02d}")
            resave(os.path.join(case, tag, name), os.path.join(out, tag, new), 2)
    with open(os.path.join(out, "sources.json"), "w") as f:
        json.dump({"mp_rank_00": os.path.basename(os.path.normpath(mp0)),
                   "mp_rank_01": os.path.basename(os.path.normpath(mp1))}, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
