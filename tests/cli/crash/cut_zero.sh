# zero-to-fp32 with a ZeRO-3 partition file cut short once opened.
. "$CLI_DIR/cut.bash"
INPUTS=z
cp -r "$TESTDATA/zero/llama_stage3_bf16_ws2" z
cut_run z/global_step3/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt opened zero-to-fp32 z out
