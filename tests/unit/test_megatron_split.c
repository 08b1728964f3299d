/* megatron-core 0.16.1's uneven pipeline split (formats/megatron/megatron_split.c): each
 * chunk's layers and the global index of its first one, as get_num_layers_to_build and
 * get_transformer_layer_offset give them (the expected values are those functions' answers),
 * the stage holding a layer, and the splits TransformerConfig refuses. The CLI runs are
 * tests/cli/reshard/uneven_pp*.sh; megatron-core loading them, testdata/gen/check_mcore_uneven_pp.py. */
#include "../../formats/megatron/megatron_private.h"
#include "test.h"

static mg_split split(int64_t layers, int pp, int vpp, int64_t first, int64_t last, int embedding, int loss)
{
    mg_split s;

    s.layers = layers;
    s.pp = pp;
    s.vpp = vpp;
    s.first = first;
    s.last = last;
    s.embedding = embedding;
    s.loss = loss;
    return s;
}

/* chunk (pp, vp) of s holds n layers from global index offset */
static int chunk_is(const mg_split *s, int pp, int vp, int64_t n, int64_t offset)
{
    return ckpt_megatron__split_layers(s, pp, vp) == n && ckpt_megatron__split_offset(s, pp, vp) == offset;
}

CKPT_TEST(test_split_first_and_last_stage)
{
    /* DeepSeek-V3's 61 layers over 8 stages: 5 first, 2 last, 9 on each of the 6 others */
    mg_split s = split(61, 8, 1, 5, 2, 0, 0);
    static const int64_t n[8] = { 5, 9, 9, 9, 9, 9, 9, 2 }, offset[8] = { 0, 5, 14, 23, 32, 41, 50, 59 };
    int pp;

    ASSERT_OK(ckpt_megatron__split_check(&s));
    for (pp = 0; pp < 8; pp++)
        ASSERT_TRUE(chunk_is(&s, pp, 0, n[pp], offset[pp]));
    ASSERT_EQ_INT(ckpt_megatron__split_stage_of(&s, 4), 0);
    ASSERT_EQ_INT(ckpt_megatron__split_stage_of(&s, 5), 1);
    ASSERT_EQ_INT(ckpt_megatron__split_stage_of(&s, 58), 6);
    ASSERT_EQ_INT(ckpt_megatron__split_stage_of(&s, 60), 7);
    ASSERT_TRUE(!ckpt_megatron__split_even(&s));
}

CKPT_TEST(test_split_virtual_chunks)
{
    /* 16 layers, PP 4, VPP 2, 2 on the first and last stage: chunks of 1, 3, 3, 1 per virtual
     * stage, the second virtual stage's after all of the first's */
    mg_split s = split(16, 4, 2, 2, 2, 0, 0);
    static const int64_t n[4] = { 1, 3, 3, 1 }, offset[2][4] = { { 0, 1, 4, 7 }, { 8, 9, 12, 15 } };
    int pp, vp;

    ASSERT_OK(ckpt_megatron__split_check(&s));
    for (vp = 0; vp < 2; vp++)
        for (pp = 0; pp < 4; pp++)
            ASSERT_TRUE(chunk_is(&s, pp, vp, n[pp], offset[vp][pp]));
    ASSERT_EQ_INT(ckpt_megatron__split_stage_of(&s, 8), 0);
    ASSERT_EQ_INT(ckpt_megatron__split_stage_of(&s, 15), 3);
}

CKPT_TEST(test_split_embedding_and_loss_accounted)
{
    /* 6 layers + embedding + loss over PP 2 x VPP 2: chunks of 2, the first and last one layer less */
    mg_split s = split(6, 2, 2, 0, 0, 1, 1);

    ASSERT_OK(ckpt_megatron__split_check(&s));
    ASSERT_TRUE(chunk_is(&s, 0, 0, 1, 0));
    ASSERT_TRUE(chunk_is(&s, 1, 0, 2, 1));
    ASSERT_TRUE(chunk_is(&s, 0, 1, 2, 3));
    ASSERT_TRUE(chunk_is(&s, 1, 1, 1, 5));
    s = split(3, 2, 1, 0, 0, 1, 0);
    ASSERT_OK(ckpt_megatron__split_check(&s));
    ASSERT_TRUE(chunk_is(&s, 0, 0, 1, 0));
    ASSERT_TRUE(chunk_is(&s, 1, 0, 2, 1));
}

CKPT_TEST(test_split_even)
{
    mg_split s = split(8, 2, 2, 0, 0, 0, 0);

    ASSERT_OK(ckpt_megatron__split_check(&s));
    ASSERT_TRUE(ckpt_megatron__split_even(&s));
    ASSERT_TRUE(chunk_is(&s, 1, 1, 2, 6));
    ASSERT_EQ_INT(ckpt_megatron__split_stage_of(&s, 5), 0);
}

CKPT_TEST(test_split_refused_as_megatron_core_does)
{
    mg_split s = split(61, 8, 1, 5, 3, 0, 0); /* 53 middle layers over 6 stages */

    ASSERT_TRUE(ckpt_megatron__split_check(&s) == CKPT_EINVALID);
    ASSERT_ERROR_MENTIONS("53 middle layers");
    s = split(4, 2, 1, 1, 0, 1, 0);
    ASSERT_TRUE(ckpt_megatron__split_check(&s) == CKPT_EINVALID);
    ASSERT_ERROR_MENTIONS("cannot be set together");
    s = split(4, 2, 1, 4, 0, 0, 0); /* a last stage without layers */
    ASSERT_TRUE(ckpt_megatron__split_check(&s) == CKPT_EINVALID);
    s = split(16, 4, 2, 3, 1, 0, 0); /* 3 first-stage layers in 2 virtual chunks */
    ASSERT_TRUE(ckpt_megatron__split_check(&s) == CKPT_EINVALID);
    ASSERT_ERROR_MENTIONS("virtual");
    s = split(4, 2, 1, 0, 0, 1, 0); /* 5 over 2 */
    ASSERT_TRUE(ckpt_megatron__split_check(&s) == CKPT_EINVALID);
    s = split(5, 2, 1, 0, 0, 0, 0);
    ASSERT_TRUE(ckpt_megatron__split_check(&s) == CKPT_EINVALID);
    ASSERT_ERROR_MENTIONS("num_layers % PP");
}
