# DeepSeek-V3 with a multi-token prediction layer as the release stores it (make_mtp.py: layer 3
# of 3 decoder layers, a copy of layer 2 with enorm, hnorm, eh_proj, shared_head.norm, and
# embed_tokens / shared_head.head equal to the main ones; num_nextn_predict_layers 1) goes to
# Megatron's mtp.layers.0 and comes back tensor for tensor, its embed_tokens and
# shared_head.head written again as copies: local and Transformer Engine names, TP 1 and
# TP 2 PP 3 EP 2 (the MTP layer, its experts split over the EP ranks, and a copy of the
# embedding on the last stage), args.mtp_num_layers 1 and num_nextn_predict_layers 1 back.
# reshard between the two layouts gives hf2mcore's files byte for byte. A differing
# shared_head.head is refused naming both tensors; num_nextn_predict_layers 2 with one MTP
# layer is refused; --drop 'model.layers.3.*' converts the model without MTP. torch_dist takes
# the MTP layers (mtp.layers.0.*, torch_dist.sh).
set -e
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
args() { python3 "$CLI_DIR/../mixtral/show_args.py" "$@"; }
same() { (cd "$1" && find . -type f | sort) | while read -r f; do cmp "$1/$f" "$2/$f"; done; }
python3 "$CLI_DIR/convertible.py" src
python3 "$CLI_DIR/make_mtp.py" src
for impl in local transformer_engine; do
    for layout in "1 1 1" "2 3 2"; do
        set -- $layout
        ckptconv hf2mcore src "mc_$1$2$3" --tp "$1" --pp "$2" --ep "$3" --transformer-impl "$impl" -q
        ckptconv mcore2hf "mc_$1$2$3" hf -q
        echo "== $impl TP $1 PP $2 EP $3: $(ckptconv diff src hf | tail -1)"
        python3 -c 'import json, sys; print("num_nextn_predict_layers:", json.load(open(sys.argv[1]))["num_nextn_predict_layers"])' hf/config.json
        rm -rf hf
    done
    ckptconv reshard mc_111 r --tp 2 --pp 3 --ep 2 -q && same mc_232 r && rm -rf r
    ckptconv reshard mc_232 r --tp 1 --pp 1 --ep 1 -q && same mc_111 r && rm -rf r
    echo "== $impl: reshard TP 1 <-> TP 2 PP 3 EP 2 gives hf2mcore's files"
    if [ "$impl" = transformer_engine ]; then
        args mc_111/iter_0000001/mp_rank_00/model_optim_rng.pt mtp_num_layers
        echo "== TP rank 1, last stage, EP rank 1"
        ckptconv inspect mc_232/iter_0000001/mp_rank_01_002_001/model_optim_rng.pt |
            grep -E "embedding|mtp.layers.0.(enorm|hnorm|eh_proj|final_layernorm|transformer_layer.mlp.experts.local_experts.[0-9].linear_fc2.weight)|output_layer"
    fi
    rm -rf mc_111 mc_232
done
set +e
python3 "$CLI_DIR/convertible.py" in
python3 "$CLI_DIR/make_mtp.py" in --head-differs
ckptconv hf2mcore in out -q
echo "shared_head.head differing in one bit: exit $?"
test ! -e out || echo "out written"
rm -rf in && cp -r src in && edit in/config.json num_nextn_predict_layers 2
ckptconv hf2mcore in out -q
echo "num_nextn_predict_layers 2: exit $?"
test ! -e out || echo "out written"
ckptconv hf2mcore src mc -q
ckptconv reshard mc td --to torch_dist --extra-state drop -q
echo "reshard --to torch_dist: exit $?"
ckptconv hf2mcore src out --drop 'model.layers.3.*' -q
echo "--drop 'model.layers.3.*': exit $?"
args out/iter_0000001/mp_rank_00/model_optim_rng.pt mtp_num_layers
ckptconv mcore2hf out hf -q
python3 -c 'import json, sys; print("num_nextn_predict_layers" in json.load(open(sys.argv[1])))' hf/config.json
