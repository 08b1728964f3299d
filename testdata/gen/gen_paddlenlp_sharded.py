"""Sharding stage 1 checkpoints saved with save_sharded_model, from the TP2 fixtures:
testdata/paddlenlp/fp32_tp2_shard2 and bf16_tp2_shard2.

    .venv/bin/python testdata/gen/gen_paddlenlp_sharded.py

A sharded save needs one process per sharding rank on a device, which a CPU machine cannot
run, so the files are made here the way PaddleNLP 2.8's trainer makes them
(paddlenlp/trainer/utils/sharding_io.py, training_args.py), from the real TP2 checkpoints
PaddleNLP wrote (gen_paddlenlp_reshard.py):
- parameters go to sharding ranks as DygraphShardingOptimizer._partition_parameters puts them
  (largest first, each to the rank with the fewest elements so far);
- model_state.tpXX_shardYY.pdparams (sharded_name_suffix) holds what filter_sharded_params
  keeps for rank YY: its own parameters; exclude_paramters_in_state_dict then drops every
  parameter that has a master weight (all of them in bf16: they are rebuilt from the master
  weights when loaded);
- optimizer.tpXX_shardYY.pdopt (optimizer_name_suffix) holds the optimizer state of rank YY's
  parameters: their accumulators, their master weights, LR_Scheduler;
- model_meta.json: parallel_config and, per tpXX_ppYY, sharding_metas with param2rank,
  structure_name_mapping (the model's state-dict order), sharding_strategy ShardingV1 and
  enable_overlap, as save_distributed_model_meta writes it (json.dump, indent 4).
Files are written with paddle.save, as the trainer does. The script is deterministic.
"""

import json
import os
import pickle
import shutil
import warnings

import numpy as np

warnings.simplefilter("ignore")
import paddle  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PD = os.path.join(os.path.dirname(HERE), "paddlenlp")
TABLE = "StructuredToParameterName@@"
SHARDS = 2


def raw(path):
    with open(path, "rb") as f:
        return pickle.load(f, encoding="latin1")


def tensor(name, a):
    t = paddle.to_tensor(a)
    t.name = name
    return t


def partition(table, state):
    """DygraphShardingOptimizer._partition_parameters: var name -> sharding rank."""
    params = [(var, int(np.prod(state[k].shape))) for k, var in table.items()]
    params.sort(key=lambda p: p[1], reverse=True)
    sizes, rank_of = [0] * SHARDS, {}
    for var, numel in params:
        r = sizes.index(min(sizes))
        rank_of[var] = r
        sizes[r] += numel
    return rank_of


def owner(key, rank_of):
    """The parameter variable an optimizer key belongs to: the longest that prefixes it."""
    hits = [v for v in rank_of if key.startswith(v + "_")]
    assert hits, key
    return max(hits, key=len)


def make(src_case, dst_case, tp):
    src, dst = os.path.join(PD, src_case), os.path.join(PD, dst_case)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    for f in ("config.json", "generation_config.json"):
        shutil.copy(os.path.join(src, f), dst)
    metas = {}
    for r in range(tp):
        model = raw(os.path.join(src, f"model_state.tp{r:02d}.pdparams"))
        opt = raw(os.path.join(src, f"optimizer.tp{r:02d}.pdopt"))
        table = model.pop(TABLE)
        rank_of = partition(table, model)
        masters = opt.get("master_weights", {})
        for s in range(SHARDS):
            suffix = f"tp{r:02d}_shard{s:02d}"
            kept = {k: tensor(table[k], v) for k, v in model.items()
                    if rank_of[table[k]] == s and table[k] not in masters}
            paddle.save(kept, os.path.join(dst, f"model_state.{suffix}.pdparams"))
            part = {}
            for k, v in opt.items():
                if k == "master_weights":
                    mw = {var: tensor(n, a) for var, (n, a) in v.items() if rank_of[var] == s}
                    if mw:
                        part[k] = mw
                elif k == "LR_Scheduler":
                    part[k] = v
                elif k != TABLE and rank_of[owner(k, rank_of)] == s:
                    a = v[1] if isinstance(v, tuple) else v
                    part[k] = tensor(k, a)
            # the optimizer's own order: accumulators, master_weights, LR_Scheduler
            order = [k for k in opt if k in part]
            paddle.save({k: part[k] for k in order}, os.path.join(dst, f"optimizer.{suffix}.pdopt"))
        metas[f"tp{r:02d}_pp00"] = {
            "param2rank": dict(sorted(rank_of.items())),
            "structure_name_mapping": table,
            "sharding_strategy": "ShardingV1",
            "enable_overlap": False,
        }
    meta = {"parallel_config": {"pp_degree": 1, "mp_degree": tp, "sharding_degree": SHARDS, "vpp_degree": 1},
            "sharding_metas": metas}
    with open(os.path.join(dst, "model_meta.json"), "w") as f:
        json.dump(meta, f, indent=4)
    print(f"{dst}: {sorted(os.listdir(dst))}")


def main():
    make("fp32_tp2", "fp32_tp2_shard2", 2)
    make("bf16_tp2", "bf16_tp2_shard2", 2)


if __name__ == "__main__":
    main()
