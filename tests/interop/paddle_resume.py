"""The optimizer files of a PaddleNLP directory resume with paddle's own AdamW, rank by rank,
without PaddleNLP: for each rank, parameters named as its model file's name table names them
(StructuredToParameterName@@, read with pickle), AdamW over them, optimizer.set_state_dict of
the rank's .pdopt, one step. AdamW creates its accumulators at the first step and takes each
from the loaded state by the parameter's name; a name the file lacks stops it ("Optimizer set
error, linear_0.w_0_moment1_0 should in state dict"), and an accumulator no parameter takes
is left over, which is checked too.

The variable names themselves are checked against the rule PaddleNLP's model construction
follows (check_names). Float32 models only (no master weights).

    python tests/interop/paddle_resume.py DIR
"""

import os
import pickle
import re
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
import paddle  # noqa: E402

NAME_TABLE = "StructuredToParameterName@@"


def check_names(model_path, table):
    """The names a PaddleNLP process gives its parameters: per class (linear, embedding,
    create_parameter, llama_lm_head[_pipe]) a counter from 0, in state-dict order, in every
    pipeline stage (the process builds only its stage)."""
    seen = {}
    for key, var in table.items():
        m = re.fullmatch(r"(.+)_(\d+)\.w_0", var)
        assert m, f"{model_path}: {key} is {var}"
        want = seen.get(m.group(1), 0)
        assert int(m.group(2)) == want, f"{model_path}: {key} is {var}, its process names it {m.group(1)}_{want}.w_0"
        seen[m.group(1)] = want + 1


def resume_rank(model_path, opt_path):
    with open(model_path, "rb") as f:
        raw = pickle.load(f, encoding="latin1")
    table = raw[NAME_TABLE]
    check_names(model_path, table)
    params = []
    # one process per rank: names and accumulator names counted afresh
    with paddle.utils.unique_name.guard():
        for key, var in table.items():
            a = np.asarray(raw[key])
            p = paddle.create_parameter(shape=list(a.shape), dtype="float32", name=var)
            p.set_value(a.astype("float32"))
            params.append(p)
        sched = paddle.optimizer.lr.CosineAnnealingDecay(1e-3, T_max=10)
        opt = paddle.optimizer.AdamW(learning_rate=sched, parameters=params, weight_decay=0.01)
        state = paddle.load(opt_path)
        assert "master_weights" not in state, f"{opt_path}: master weights (a float32 model only)"
        loaded = {k for k, v in state.items() if isinstance(v, paddle.Tensor)}
        opt.set_state_dict(state)
        loss = sum((p * 1.0).sum() for p in params)
        loss.backward()
        opt.step()
    left = set(opt._accumulators_holder)
    assert not left, f"{opt_path}: accumulators no parameter took: {sorted(left)[:4]}"
    print(f"{os.path.basename(opt_path)}: {len(params)} parameters, {len(loaded)} accumulators taken, one step")


def main():
    d = sys.argv[1]
    files = sorted(os.listdir(d))
    n = 0
    for f in files:
        m = re.fullmatch(r"model_state(\..*)?\.pdparams", f)
        if m:
            opt = "optimizer%s.pdopt" % (m.group(1) or "")
            resume_rank(os.path.join(d, f), os.path.join(d, opt))
            n += 1
    assert n, f"{d}: no model files"


if __name__ == "__main__":
    main()
