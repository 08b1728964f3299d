#!/usr/bin/env python3
"""One pair of testdata/megatron/distopt/oracle.json (or of ORACLE) against ckptconv.

    distopt_check.py CKPTCONV TESTDATA INDEX WORKDIR [ORACLE [FORM]]

Pair INDEX of oracle.json is Megatron's own reshard of a fixture X (megatron-core built at
layout Y, load_checkpoint of X's fully_reshardable save, save_checkpoint --ckpt-format torch),
described per file by testdata/gen/distopt_hashes.py (the sha256 of every tensor, the
non-tensor values a reshard carries). Here ckptconv reshards X's legacy save to Y (TP, PP,
VPP, DP and the target's buckets) and the same description of its output must equal the
oracle's: every tensor bit for bit (model, fp32 masters, both Adam moments), numel_unpadded,
buckets_coalesced, the optimizer's param groups and step, the scheduler, the iteration.

ORACLE (default oracle.json) may be oracle_moe.json (the mixture-of-experts fixture at its EP
or another: --ep, --etp; a grouped_gemm pair's model only, --moe-grouped-gemm on),
oracle_moe_plain.json (the same with the non-distributed optimizer: chained [dense, expert]
torch state dicts; its source made by ckptconv, DERIVED),
oracle_fp16_inst.json (fp16 with its grad scaler, distributed-optimizer instances) or
oracle_versions.json, megatron-core 0.13.1's and 0.19's own
reshards (README_megatron_distopt_versions.md); FORM (default legacy) picks which committed
save of X ckptconv reads (each holds the same state); FORM `etp1` reads ckptconv's reshard of
X's legacy save to TP 2 EP 2 at expert TP 1 (the files megatron-core writes there, oracle_moe.json
pair 5: a source with no file for some (TP, EP) ranks). The values under rerun_state_machine
(0.13.1's legacy files) are not compared: Megatron's load resets current_iteration, and
their enums render differently with and without megatron-core installed."""
import json
import os
import shutil
import subprocess
import sys


# fixtures whose legacy files are ckptconv's reshard of a committed one: the MoE model trained
# with the non-distributed optimizer holds, tensor for tensor, the state of the same training with
# the distributed one (testdata/gen/README_megatron_distopt.md; pair 0 of oracle_moe_plain.json
# checks every tensor and value of the derived files against megatron-core's)
DERIVED = {"m_tp1pp1dp2_ep2_plain": ("m_tp1pp1dp2_ep2", ["--tp", "1", "--pp", "1", "--to-optimizer", "plain"])}


def main():
    ckptconv, testdata, index, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    oracle = sys.argv[5] if len(sys.argv) > 5 else "oracle.json"
    sys.path.insert(0, os.path.join(testdata, "gen"))
    import distopt_hashes as dh

    form = sys.argv[6] if len(sys.argv) > 6 else "legacy"
    with open(os.path.join(testdata, "megatron", "distopt", oracle)) as f:
        pair = json.load(f)["pairs"][index]
    source = pair["source"]
    for saved in ("/fully_reshardable", "/torch_dist"):
        if source.endswith(saved):
            source = source[: -len(saved)]
    name = os.path.basename(source.rstrip("/"))
    if name in DERIVED:
        # not committed (testdata budget): made from its committed twin as the oracle's pair 0
        # shows it equals megatron-core's own files
        twin, args = DERIVED[name]
        source = os.path.join(work, f"{oracle}.{index}.{name}")
        shutil.rmtree(source, ignore_errors=True)
        subprocess.run([ckptconv, "reshard", os.path.join(testdata, "megatron", "distopt", twin, "legacy"), source,
                        "-q"] + args, check=True)
    else:
        source = os.path.join(testdata, source.rstrip("/") + "/" + ("legacy" if form == "etp1" else form))
    if form == "etp1":
        via = os.path.join(work, f"{oracle}.{index}.via_etp1")
        shutil.rmtree(via, ignore_errors=True)
        subprocess.run([ckptconv, "reshard", source, via, "-q", "--tp", "2", "--pp", "1", "--dp", "2", "--ep", "2",
                        "--etp", "1"], check=True)
        source = via
    y = pair["target_layout"]
    bucket = pair.get("target_ddp_bucket_size")
    out = os.path.join(work, f"{oracle}.{index}.{form}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [ckptconv, "reshard", source, out, "-q",
           "--tp", str(y["tp"]), "--pp", str(y["pp"]), "--vpp", str(pair.get("target_vpp") or 1),
           "--dp", str(y["dp"]), "--ddp-bucket-size", str(bucket) if bucket else "none",
           "--num-distributed-optimizer-instances", str(y.get("inst", 1))]
    # a mixture of experts: its expert-parallel (and expert tensor-parallel) size; the local
    # spec's GroupedMLP is written model only, so only the model is compared
    if "ep" in y:
        cmd += ["--ep", str(y["ep"])]
    if "etp" in y:
        cmd += ["--etp", str(y["etp"])]
    model_only = bool(y.get("grouped_gemm"))
    if model_only:
        cmd += ["--moe-grouped-gemm", "on", "--no-optimizer"]
    print(" ".join(cmd[1:]))
    subprocess.run(cmd, check=True)
    ours = dh.describe_dir(out)
    bad = []
    files = {rel: f for rel, f in pair["files"].items() if not model_only or rel.endswith("model_optim_rng.pt")}
    if sorted(ours["files"]) != sorted(files):
        bad.append(f"files: ours {sorted(ours['files'])}, Megatron's {sorted(files)}")
    for rel, want in sorted(files.items()):
        got = ours["files"].get(rel)
        if got is None:
            continue
        for key, rec in sorted(want["tensors"].items()):
            if got["tensors"].get(key) != rec:
                bad.append(f"{rel}: tensor {key}: ours {got['tensors'].get(key)}, Megatron's {rec}")
        for key in sorted(set(got["tensors"]) - set(want["tensors"])):
            bad.append(f"{rel}: tensor {key} only ours")
        for key, val in sorted(want["values"].items()):
            if key.startswith("rerun_state_machine") or (model_only and not key.startswith("model/")):
                continue
            if got["values"].get(key) != val:
                bad.append(f"{rel}: {key}: ours {got['values'].get(key)!r}, Megatron's {val!r}")
    for line in bad[:40]:
        print(line)
    n = sum(len(f["tensors"]) for f in files.values())
    print(f"{pair['source']} -> {pair['target']}: {n} tensors, {len(bad)} differences")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
