/* TEGroupedMLP's names (formats/megatron/megatron_experts_te.c): which keys are its own, the
 * SequentialMLP name each is read under, and the key a SequentialMLP expert's tensor gets in
 * it at a local expert index. The sets themselves: tests/cli/mixtral/te_grouped.sh and
 * tests/interop/test_te_grouped.sh. */
#include "../../formats/megatron/megatron_private.h"
#include "test.h"

#define L0 "decoder.layers.0.mlp.experts."

CKPT_TEST(test_te_keys)
{
    ASSERT_EQ_INT(ckpt_megatron__te_key(L0 "linear_fc1.weight0"), 1);
    ASSERT_EQ_INT(ckpt_megatron__te_key(L0 "linear_fc2.weight17"), 1);
    ASSERT_EQ_INT(ckpt_megatron__te_key(L0 "linear_fc1.bias3"), 1);
    ASSERT_EQ_INT(ckpt_megatron__te_key(L0 "linear_fc2._extra_state"), 2);
    ASSERT_EQ_INT(ckpt_megatron__te_key("mtp.layers.0.transformer_layer.mlp.experts.linear_fc1.weight2"), 1);
    /* SequentialMLP's, GroupedMLP's, a dense MLP's, the shared experts', no index */
    ASSERT_EQ_INT(ckpt_megatron__te_key(L0 "local_experts.0.linear_fc1.weight"), 0);
    ASSERT_EQ_INT(ckpt_megatron__te_key(L0 "weight1"), 0);
    ASSERT_EQ_INT(ckpt_megatron__te_key("decoder.layers.0.mlp.linear_fc1.weight"), 0);
    ASSERT_EQ_INT(ckpt_megatron__te_key("decoder.layers.0.mlp.shared_experts.linear_fc1.weight"), 0);
    ASSERT_EQ_INT(ckpt_megatron__te_key(L0 "linear_fc1.weight"), 0);
    ASSERT_EQ_INT(ckpt_megatron__te_key(L0 "linear_fc3.weight0"), 0);
    ASSERT_EQ_INT(ckpt_megatron__te_key(L0 "linear_fc1.weight0x"), 0);
}

CKPT_TEST(test_te_names_both_ways)
{
    ckpt_buf b = CKPT_BUF_INIT;

    ASSERT_OK(ckpt_megatron__te_read_name(L0 "linear_fc1.weight5", 0, &b));
    ASSERT_EQ_STR((const char *)b.data, L0 "local_experts.5.linear_fc1.weight");
    ckpt_buf_clear(&b);
    ASSERT_OK(ckpt_megatron__te_read_name(L0 "linear_fc1.bias12", 0, &b));
    ASSERT_EQ_STR((const char *)b.data, L0 "local_experts.12.linear_fc1.bias");
    ckpt_buf_clear(&b);
    /* the one _extra_state, under each local expert's name */
    ASSERT_OK(ckpt_megatron__te_read_name(L0 "linear_fc2._extra_state", 3, &b));
    ASSERT_EQ_STR((const char *)b.data, L0 "local_experts.3.linear_fc2._extra_state");
    ckpt_buf_clear(&b);
    ASSERT_OK(ckpt_megatron__te_local_name(L0 "local_experts.9.linear_fc2.weight", 1, &b));
    ASSERT_EQ_STR((const char *)b.data, L0 "linear_fc2.weight1");
    ckpt_buf_clear(&b);
    ASSERT_OK(ckpt_megatron__te_local_name(L0 "local_experts.9.linear_fc1.bias", 1, &b));
    ASSERT_EQ_STR((const char *)b.data, L0 "linear_fc1.bias1");
    ckpt_buf_clear(&b);
    ASSERT_OK(ckpt_megatron__te_local_name(L0 "local_experts.8.linear_fc1._extra_state", 0, &b));
    ASSERT_EQ_STR((const char *)b.data, L0 "linear_fc1._extra_state");
    ckpt_buf_dispose(&b);
}
