# DeepSeek-V3 without query compression (q_lora_rank null, as DeepSeek-V2-Lite): derived from
# testdata/hf/deepseek_v3_tiny (num_experts_per_tok 4, rms_norm_eps 1e-6, as round_trip.sh) by
# make_q_proj.py, one self_attn.q_proj per layer instead of q_a_proj, q_a_layernorm and
# q_b_proj. It converts to Megatron's linear_q_proj (column-cut over TP ranks, no layer norm under
# either name set) and back to the same model.safetensors byte for byte, at TP 1 and TP 2 EP 2;
# args say q_lora_rank None; verify passes the Hugging Face files against hf2mcore's output and
# fails at layer 1's attention when two heads of its q_proj are exchanged. A q_proj beside
# q_lora_rank set, or q_a_proj with q_lora_rank null, is refused naming the tensor.
set -e
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
args() { python3 "$CLI_DIR/../mixtral/show_args.py" "$@"; }
python3 "$CLI_DIR/convertible.py" src
python3 "$CLI_DIR/make_q_proj.py" src
for layout in "1 1 1" "2 1 2"; do
    set -- $layout
    for impl in local transformer_engine; do
        ckptconv hf2mcore src mc --tp "$1" --pp "$2" --ep "$3" --transformer-impl "$impl" -q
        ckptconv mcore2hf mc hf -q
        cmp src/model.safetensors hf/model.safetensors
        echo "TP $1 EP $3 $impl: the same bytes; q_lora_rank $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["q_lora_rank"])' hf/config.json)"
        ckptconv inspect "$(ls -d mc/iter_0000001/mp_rank_00* | head -1)/model_optim_rng.pt" |
            grep -E 'layers\.1\.self_attention\.linear_q' | sed -E 's/^([^ ]+) +[^ ]+ +(\[[^]]*\]).*/  \1 \2/'
        rm -rf mc hf
    done
done
ckptconv hf2mcore src mc -q
args mc/iter_0000001/mp_rank_00/model_optim_rng.pt q_lora_rank
ckptconv verify src mc --device cpu -q
echo "verify: exit $?"
set +e
rm -rf heads && cp -r src heads
python3 "$CLI_DIR/../verify/edit_safetensors.py" heads/model.safetensors swap_rows model.layers.1.self_attn.q_proj.weight 0 12 12
ckptconv verify heads mc --device cpu | grep -E "^layer .*FAIL" | awk '{print $1, $2, $3, $NF}'
rm -rf both && cp -r src both && edit both/config.json q_lora_rank 16
ckptconv hf2mcore both out -q
echo "q_proj with q_lora_rank 16: exit $?"
python3 "$CLI_DIR/convertible.py" old && edit old/config.json q_lora_rank null
ckptconv hf2mcore old out -q
echo "q_a_proj with q_lora_rank null: exit $?"
test ! -e out && echo "nothing written"
