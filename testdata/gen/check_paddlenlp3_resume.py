"""PaddleNLP 3 resumes from what `ckptconv reshard` wrote: for each DIR (a reshard output of one
of the fleet3_* models, any TP x PP), one process per rank builds the model at DIR's layout
(gen_paddlenlp3_fleet.build), loads its rank's model file with set_state_dict, creates AdamW
and loads its rank's optimizer file with set_state_dict, checks that every parameter and every
moment came from the files, and runs one optimizer step (AdamW creates its accumulators at the
first step, which is where a name the file lacks stops PaddleNLP: "Optimizer set error,
linear_0.w_0_moment1_0 should in state dict"). By hand, in the environment of
README_paddlenlp3.md:

    python testdata/gen/check_paddlenlp3_resume.py DIR:TP:PP ...
"""

import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

warnings.simplefilter("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_paddlenlp3_fleet as gen  # noqa: E402


def worker(d, tp, pp):
    import paddle

    model, mp_rank, pp_rank = gen.build(tp, pp)
    variant = gen.suffix(tp, mp_rank, pp, pp_rank)
    state = paddle.load(os.path.join(d, "model_state.%s.pdparams" % variant if variant else "model_state.pdparams"))
    want = {k: v.numpy().copy() for k, v in state.items()}
    n_params = len(want)
    # the pipeline model's set_state_dict renames the dict's keys to its own
    missing, unexpected = model.set_state_dict(state)
    assert not missing and not unexpected, (missing, unexpected)
    got = model.state_dict()
    assert set(got) == set(want), sorted(set(got) ^ set(want))
    for k, p in got.items():
        assert np.array_equal(p.numpy(), want[k]), k
    sched = paddle.optimizer.lr.CosineAnnealingDecay(1e-3, T_max=10)
    opt = paddle.optimizer.AdamW(learning_rate=sched, parameters=model.parameters(), weight_decay=0.01)
    opt_state = paddle.load(os.path.join(d, "optimizer.%s.pdopt" % variant if variant else "optimizer.pdopt"))
    opt.set_state_dict(opt_state)
    before = {k: v.numpy().copy() for k, v in opt_state.items() if isinstance(v, paddle.Tensor)}
    gen.step(model, tp, mp_rank, opt)
    after = opt.state_dict()
    assert set(before) == {k for k, v in after.items() if isinstance(v, paddle.Tensor)}, "accumulators differ"
    for k, v in before.items():
        if k.endswith("_beta1_pow_acc_0"):
            # the step multiplies it by beta1: the loaded value was used, not a fresh one
            assert np.allclose(after[k].numpy(), v * 0.9), k
    print("resume %s TP %d PP %d rank tp%d pp%d: %d parameters, %d accumulators loaded, one step run, "
          "lr %.10g" % (os.path.basename(d), tp, pp, mp_rank, pp_rank, n_params, len(before), sched.get_lr()))


def main():
    if sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    for arg in sys.argv[1:]:
        d, tp, pp = arg.rsplit(":", 2)
        d = os.path.abspath(d)
        with tempfile.TemporaryDirectory() as logs:
            n = int(tp) * int(pp)
            cmd = ([sys.executable, __file__] if n == 1 else
                   [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", str(n), "--log_dir", logs,
                    __file__]) + ["--worker", d, tp, pp]
            r = subprocess.run(cmd, capture_output=True, text=True)
            out = r.stdout.splitlines()
            for name in sorted(os.listdir(logs)):
                if name.startswith("workerlog"):
                    out += open(os.path.join(logs, name)).read().splitlines()
            lines = list(dict.fromkeys(x for x in out if x.startswith(("resume ", "AssertionError", "Traceback"))))
            print("\n".join(lines) if lines else "%s: no result" % arg)
            if r.returncode != 0:
                print("%s: FAILED (exit %d)" % (arg, r.returncode))
                for name in sorted(os.listdir(logs)):
                    sys.stderr.write(open(os.path.join(logs, name)).read()[-1500:])
                sys.stderr.write(r.stderr[-1500:])


if __name__ == "__main__":
    main()
