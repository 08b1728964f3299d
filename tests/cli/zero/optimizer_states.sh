# --optimizer-states: optimizer_states.bin with <param>.exp_avg / .exp_avg_sq of every
# trainable parameter, same shapes as the weights.
set -e
ckptconv zero-to-fp32 -q --optimizer-states "$TESTDATA/zero/stage2_fp32_ws2" out
ls out
ckptconv inspect out/optimizer_states.bin | sed -n '/^name/,/^$/p'
