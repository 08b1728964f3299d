/* DeepSpeed ZeRO checkpoint directories: every real fixture under testdata/zero against
 * what DeepSpeed's own zero_to_fp32 wrote for it (names, order, shapes, SHA-256 of the
 * values, tied aliases), laziness, the BF16_Optimizer case against its partitions, and
 * broken directories (a missing rank file, a truncated shard, files of the wrong kind). */
#include "test.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- SHA-256 (FIPS 180-4) ------------------------------------------------- */

typedef struct sha256 {
    uint32_t h[8];
    uint8_t block[64];
    size_t fill;
    uint64_t bits;
} sha256;

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void sha256_block(sha256 *s)
{
    uint32_t w[64], v[8], t1, t2;
    int i;

    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)s->block[4 * i] << 24 | (uint32_t)s->block[4 * i + 1] << 16 |
               (uint32_t)s->block[4 * i + 2] << 8 | s->block[4 * i + 3];
    for (i = 16; i < 64; i++)
        w[i] = w[i - 16] + (ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3)) + w[i - 7] +
               (ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10));
    memcpy(v, s->h, sizeof v);
    for (i = 0; i < 64; i++) {
        t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) + ((v[4] & v[5]) ^ (~v[4] & v[6])) + sha_k[i] + w[i];
        t2 = (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) + ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof *v);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (i = 0; i < 8; i++)
        s->h[i] += v[i];
}

static void sha256_init(sha256 *s)
{
    static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
    memcpy(s->h, h0, sizeof h0);
    s->fill = 0;
    s->bits = 0;
}

static void sha256_update(sha256 *s, const void *data, size_t len)
{
    const uint8_t *p = data;

    s->bits += (uint64_t)len * 8;
    while (len--) {
        s->block[s->fill++] = *p++;
        if (s->fill == 64) {
            sha256_block(s);
            s->fill = 0;
        }
    }
}

/* Lower-case hex digest into out[65]. */
static void sha256_hex(sha256 *s, char *out)
{
    uint64_t bits = s->bits;
    uint8_t pad = 0x80, len[8];
    int i;

    sha256_update(s, &pad, 1);
    pad = 0;
    while (s->fill != 56)
        sha256_update(s, &pad, 1);
    for (i = 0; i < 8; i++)
        len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(s, len, 8);
    for (i = 0; i < 8; i++)
        snprintf(out + 8 * i, 9, "%08x", (unsigned)s->h[i]);
}

CKPT_TEST(test_zero_sha256_known_answers)
{
    sha256 s;
    char hex[65];

    sha256_init(&s);
    sha256_hex(&s, hex);
    ASSERT_EQ_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_init(&s);
    sha256_update(&s, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56);
    sha256_hex(&s, hex);
    ASSERT_EQ_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* ---- fixtures ---------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Cases under testdata/zero with DeepSpeed's expected outputs, sorted; NULL-terminated. */
static char **expected_cases(size_t *n)
{
    DIR *d = opendir(ckpt_test_data("zero"));
    char **v = calloc(64, sizeof *v);
    struct dirent *e;
    struct stat st;
    char rel[512];

    *n = 0;
    while (d && v && (e = readdir(d)) != NULL && *n < 63) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(rel, sizeof rel, "zero/%s/expected/tensors.json", e->d_name);
        if (stat(ckpt_test_data(rel), &st) == 0)
            v[(*n)++] = strdup(e->d_name);
    }
    if (d)
        closedir(d);
    if (v)
        qsort(v, *n, sizeof *v, cmp_str);
    return v;
}

static void free_cases(char **v, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static cJSON *load_json(const char *path)
{
    size_t len;
    unsigned char *text = ckpt_test_read_file(path, &len);
    cJSON *j;

    if (!text)
        return NULL;
    j = cJSON_ParseWithLength((const char *)text, len);
    free(text);
    return j;
}

/* SHA-256 of the tensor's values in C order as `as` (its own dtype or float32). */
static int tensor_sha(const ckpt_tensor *t, ckpt_dtype as, char *hex)
{
    int64_t n = ckpt_tensor_numel(t);
    size_t own = (size_t)n * ckpt_dtype_size(t->dtype), out = (size_t)n * ckpt_dtype_size(as);
    void *a = malloc(own ? own : 1), *b = malloc(out ? out : 1);
    sha256 s;
    int rc;

    if (!a || !b) {
        free(a);
        free(b);
        return CKPT_ENOMEM;
    }
    rc = ckpt_tensor_read(t, 0, n, t->dtype, a);
    if (rc >= 0 && as != t->dtype)
        rc = ckpt_dtype_convert(as, b, t->dtype, a, (size_t)n);
    else if (rc >= 0)
        memcpy(b, a, own);
    if (rc >= 0) {
        sha256_init(&s);
        sha256_update(&s, b, out);
        sha256_hex(&s, hex);
    }
    free(a);
    free(b);
    return rc;
}

static const cJSON *find_named(const cJSON *list, const char *name)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, list) {
        const cJSON *n = cJSON_GetObjectItem(item, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            return item;
    }
    return NULL;
}

/* One case against expected/tensors.json (outputs.default). */
static int check_case(const char *name, cJSON *desc)
{
    const cJSON *out = cJSON_GetObjectItem(cJSON_GetObjectItem(desc, "outputs"), "default");
    const cJSON *names = cJSON_GetObjectItem(out, "tensor_names"), *tensors = cJSON_GetObjectItem(out, "tensors");
    const cJSON *item;
    const ckpt_value *root;
    ckpt_ckpt *c = NULL;
    char rel[256];
    size_t i = 0;
    int ok = 0;

    snprintf(rel, sizeof rel, "zero/%s", name);
    if (!names || !tensors || ckpt_open(&c, ckpt_test_data(rel), NULL) < 0) {
        fprintf(stderr, "  %s: %s\n", name, ckpt_error_last()->message);
        return 0;
    }
    root = ckpt_root(c);
    if (strcmp(ckpt_format_name(c), "deepspeed_zero") != 0 || ckpt_input_size(c) == 0 || !root ||
        root->kind != CKPT_VAL_DICT || root->u.dict.map.n != (size_t)cJSON_GetArraySize(names) ||
        ckpt_tensor_count(c) != (size_t)cJSON_GetArraySize(names)) {
        fprintf(stderr, "  %s: %zu tensors, expected %d\n", name, ckpt_tensor_count(c), cJSON_GetArraySize(names));
        goto done;
    }
    cJSON_ArrayForEach(item, names) {
        const ckpt_tensor *t = ckpt_tensor_at(c, i);
        const cJSON *e = find_named(tensors, item->valuestring), *dim, *alias;
        ckpt_dtype want;
        char hex[65];
        int d = 0;

        if (!e || strcmp(t->name, item->valuestring) != 0 ||
            !ckpt_value_is_str(root->u.dict.map.keys[i], t->name) ||
            root->u.dict.map.vals[i]->kind != CKPT_VAL_TENSOR || root->u.dict.map.vals[i]->u.tensor.index != i) {
            fprintf(stderr, "  %s: tensor %zu is %s, expected %s\n", name, i, t->name, item->valuestring);
            goto done;
        }
        /* DeepSpeed 0.19 writes floating tensors as float32; the reader keeps what is stored */
        want = ckpt_dtype_from_name(cJSON_GetObjectItem(e, "dtype")->valuestring);
        if (want != t->dtype && !(ckpt_dtype_is_float(want) && ckpt_dtype_is_float(t->dtype))) {
            fprintf(stderr, "  %s: %s is %s, expected %s\n", name, t->name, ckpt_dtype_name(t->dtype),
                    ckpt_dtype_name(want));
            goto done;
        }
        cJSON_ArrayForEach(dim, cJSON_GetObjectItem(e, "shape")) {
            if (d >= t->ndim || t->shape[d] != (int64_t)dim->valuedouble)
                break;
            d++;
        }
        if (d != t->ndim || d != cJSON_GetArraySize(cJSON_GetObjectItem(e, "shape"))) {
            fprintf(stderr, "  %s: %s has the wrong shape\n", name, t->name);
            goto done;
        }
        if (tensor_sha(t, want, hex) < 0 || strcmp(hex, cJSON_GetObjectItem(e, "sha256")->valuestring) != 0) {
            fprintf(stderr, "  %s: %s values differ (%s)\n", name, t->name, ckpt_error_last()->message);
            goto done;
        }
        alias = cJSON_GetObjectItem(e, "alias_of");
        if (cJSON_IsString(alias)) {
            const ckpt_tensor *src = ckpt_tensor_find(c, alias->valuestring);
            if (!src || src == t || src->storage != t->storage) {
                fprintf(stderr, "  %s: %s does not share the storage of %s\n", name, t->name, alias->valuestring);
                goto done;
            }
        }
        i++;
    }
    ok = 1;
done:
    ckpt_close(c);
    return ok;
}

CKPT_TEST(test_zero_every_case_matches_zero_to_fp32)
{
    size_t n, i, failed = 0;
    char **cases = expected_cases(&n);

    ASSERT_TRUE(cases != NULL);
    ASSERT_TRUE(n >= 14);
    for (i = 0; i < n; i++) {
        char rel[256];
        cJSON *desc;
        snprintf(rel, sizeof rel, "zero/%s/expected/tensors.json", cases[i]);
        desc = load_json(ckpt_test_data(rel));
        if (!desc || !check_case(cases[i], desc))
            failed++;
        cJSON_Delete(desc);
    }
    free_cases(cases, n);
    ASSERT_EQ_INT(failed, 0);
}

static ckpt_ckpt *open_zero(const char *path)
{
    ckpt_ckpt *c = NULL;
    return ckpt_open(&c, path, NULL) < 0 ? NULL : c;
}

CKPT_TEST(test_zero_tensors_are_extents_of_the_partitions)
{
    ckpt_ckpt *c = open_zero(ckpt_test_data("zero/stage2_fp32_ws2"));
    const ckpt_tensor *t;

    ASSERT_TRUE(c != NULL);
    /* group 0 partitions hold 540 elements: embed.weight [0, 481) lies in rank 0,
     * fc1.weight [481, 780) straddles ranks 0 and 1 */
    t = ckpt_tensor_find(c, "embed.weight");
    ASSERT_TRUE(t && t->storage->n_extents == 1 && t->storage->nbytes == 481 * 4);
    t = ckpt_tensor_find(c, "fc1.weight");
    ASSERT_TRUE(t && t->storage->n_extents == 2 && t->storage->nbytes == 299 * 4);
    ASSERT_TRUE(t->storage->extents[0].file != t->storage->extents[1].file);
    ASSERT_EQ_INT(t->storage->extents[0].size, (540 - 481) * 4);
    ckpt_close(c);

    /* stage 3: ceil(481/2) = 241 elements from rank 0, 240 from rank 1 */
    c = open_zero(ckpt_test_data("zero/stage3_fp32_ws2"));
    ASSERT_TRUE(c != NULL);
    t = ckpt_tensor_find(c, "embed.weight");
    ASSERT_TRUE(t && t->storage->n_extents == 2);
    ASSERT_EQ_INT(t->storage->extents[0].size, 241 * 4);
    ASSERT_EQ_INT(t->storage->extents[1].size, 240 * 4);
    ckpt_close(c);
}

CKPT_TEST(test_zero_opens_the_tag_directory_itself)
{
    ckpt_ckpt *c = open_zero(ckpt_test_data("zero/stage3_fp32_ws4/global_step3"));
    const ckpt_tensor *t;
    float v;

    ASSERT_TRUE(c != NULL);
    ASSERT_EQ_STR(ckpt_format_name(c), "deepspeed_zero");
    ASSERT_EQ_INT(ckpt_tensor_count(c), 11);
    t = ckpt_tensor_find(c, "lm_head.weight");
    ASSERT_TRUE(t && t->storage == ckpt_tensor_find(c, "embed.weight")->storage);
    ASSERT_OK(ckpt_tensor_read(t, 480, 1, CKPT_DTYPE_F32, &v)); /* the last element, from rank 3 */
    ASSERT_TRUE(v == v);
    ckpt_close(c);
}

/* A copy of testdata/zero/<name> as ./<name> (latest + global_step3/). */
static int copy_case(const char *name)
{
    char src[256], dst[512];
    unsigned char *data;
    size_t len;

    snprintf(src, sizeof src, "zero/%s/latest", name);
    if (mkdir(name, 0755) != 0 || !(data = ckpt_test_read_file(ckpt_test_data(src), &len)))
        return -1;
    snprintf(dst, sizeof dst, "%s/latest", name);
    ckpt_test_write_file(dst, data, len);
    free(data);
    snprintf(src, sizeof src, "zero/%s/global_step3", name);
    snprintf(dst, sizeof dst, "%s/global_step3", name);
    return ckpt_test_copy_data_dir(src, dst);
}

CKPT_TEST(test_zero_missing_rank_file_is_named)
{
    ckpt_ckpt *c = NULL;

    ASSERT_TRUE(copy_case("stage2_fp32_ws2") == 0);
    ASSERT_TRUE(unlink("stage2_fp32_ws2/global_step3/zero_pp_rank_1_mp_rank_00_optim_states.pt") == 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "stage2_fp32_ws2", NULL));
    ASSERT_ERROR_MENTIONS("expected 2 *_optim_states.pt files for world size 2, found 1: zero_pp_rank_1 missing");
    ASSERT_ERROR_MENTIONS("stage2_fp32_ws2/global_step3");

    ASSERT_TRUE(copy_case("stage3_fp32_ws4") == 0);
    ASSERT_TRUE(unlink("stage3_fp32_ws4/global_step3/zero_pp_rank_2_mp_rank_00_model_states.pt") == 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "stage3_fp32_ws4", NULL));
    ASSERT_ERROR_MENTIONS("expected 4 *_model_states.pt files for world size 4, found 3: zero_pp_rank_2 missing");
    ASSERT_TRUE(unlink("stage3_fp32_ws4/global_step3/zero_pp_rank_2_mp_rank_00_optim_states.pt") == 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "stage3_fp32_ws4", NULL));
    ASSERT_ERROR_MENTIONS("found 3: zero_pp_rank_2 missing");
    ASSERT_TRUE(c == NULL);
}

CKPT_TEST(test_zero_truncated_shard_is_refused)
{
    const char *path = "stage3_bf16_ws2/global_step3/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt";
    ckpt_ckpt *c = NULL;
    unsigned char *data;
    size_t len;

    ASSERT_TRUE(copy_case("stage3_bf16_ws2") == 0);
    data = ckpt_test_read_file(path, &len);
    ASSERT_TRUE(data != NULL);
    ckpt_test_write_file(path, data, len / 2);
    free(data);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "stage3_bf16_ws2", NULL));
    ASSERT_ERROR_MENTIONS("bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt");
}

CKPT_TEST(test_zero_files_of_the_wrong_kind_are_refused)
{
    const char *model = "stage2_fp32_ws2/global_step3/mp_rank_00_model_states.pt";
    const char *optim = "stage2_fp32_ws2/global_step3/zero_pp_rank_0_mp_rank_00_optim_states.pt";
    ckpt_ckpt *c = NULL;
    unsigned char *data;
    size_t len;

    ASSERT_TRUE(copy_case("stage2_fp32_ws2") == 0);
    data = ckpt_test_read_file(model, &len);
    ASSERT_TRUE(data != NULL);
    ckpt_test_write_file(optim, data, len); /* a model-states file where rank 0's optimizer states belong */
    free(data);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "stage2_fp32_ws2", NULL));
    ASSERT_ERROR_MENTIONS("zero_pp_rank_0_mp_rank_00_optim_states.pt is not a ZeRO optimizer-states file");

    data = ckpt_test_read_file(ckpt_test_data("torch/basic.pt"), &len);
    ASSERT_TRUE(data != NULL);
    ckpt_test_write_file(model, data, len);
    free(data);
    ASSERT_TRUE(ckpt_open(&c, "stage2_fp32_ws2", NULL) < 0);
    ASSERT_ERROR_MENTIONS("mp_rank_00_model_states.pt");
}

CKPT_TEST(test_zero_latest_naming_a_missing_tag)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;

    ASSERT_TRUE(copy_case("stage1_fp32_ws2") == 0);
    ckpt_test_write_file("stage1_fp32_ws2/latest", "global_step9\n", 13);
    ASSERT_TRUE(ckpt_open(&c, "stage1_fp32_ws2", NULL) < 0); /* nobody bids */
    o.format = "deepspeed_zero";
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_open(&c, "stage1_fp32_ws2", &o));
    ASSERT_ERROR_MENTIONS("global_step9");
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_open(&c, ckpt_test_data("torch"), &o));
    ASSERT_ERROR_MENTIONS("no 'latest' file");
}

/* BF16_Optimizer partitions keep their end padding; the merge must give the unpadded
 * concatenation over ranks, cut in param_shapes order, and each value must round to the
 * bf16 weight the model-states file holds. */
CKPT_TEST(test_zero_bf16_optimizer_matches_its_partitions)
{
    static const char *const params[2][3] = { { "embed.weight", "fc1.weight", "fc2.weight" },
                                              { "fc1.bias", "norm.weight", "norm.bias" } };
    static const int64_t numel[2][3] = { { 481, 299, 299 }, { 23, 23, 23 } };
    ckpt_ckpt *c = open_zero(ckpt_test_data("zero/bf16_optimizer_ws2"));
    ckpt_ckpt *model = open_zero(ckpt_test_data("zero/bf16_optimizer_ws2/global_step3/mp_rank_00_model_states.pt"));
    float flat[2][1080], got[481];
    int64_t off;
    int g, r, i, k;

    ASSERT_TRUE(c != NULL && model != NULL);
    ASSERT_EQ_INT(ckpt_note_count(c), 1);
    ASSERT_TRUE(strstr(ckpt_note_at(c, 0), "BF16_Optimizer") != NULL);
    for (g = 0; g < 2; g++) {
        int64_t filled = 0;
        for (r = 0; r < 2; r++) {
            char path[256], name[64];
            ckpt_ckpt *o;
            const ckpt_tensor *p;
            snprintf(path, sizeof path,
                     "zero/bf16_optimizer_ws2/global_step3/bf16_zero_pp_rank_%d_mp_rank_00_optim_states.pt", r);
            o = open_zero(ckpt_test_data(path));
            ASSERT_TRUE(o != NULL);
            snprintf(name, sizeof name, "optimizer_state_dict/single_partition_of_fp32_groups/%d", g);
            p = ckpt_tensor_find(o, name);
            ASSERT_TRUE(p != NULL && filled + ckpt_tensor_numel(p) <= 1080);
            ASSERT_OK(ckpt_tensor_read(p, 0, ckpt_tensor_numel(p), CKPT_DTYPE_F32, flat[g] + filled));
            filled += ckpt_tensor_numel(p);
            ckpt_close(o);
        }
        ASSERT_EQ_INT(filled, g == 0 ? 1080 : 72); /* padded to a multiple of 2 * W */
        for (i = 0, off = 0; i < 3; i++) {
            const ckpt_tensor *t = ckpt_tensor_find(c, params[g][i]);
            const ckpt_tensor *w;
            uint16_t bf[481];
            char mname[64];
            ASSERT_TRUE(t != NULL && ckpt_tensor_numel(t) == numel[g][i]);
            ASSERT_OK(ckpt_tensor_read(t, 0, numel[g][i], CKPT_DTYPE_F32, got));
            ASSERT_TRUE(memcmp(got, flat[g] + off, (size_t)numel[g][i] * sizeof *got) == 0);
            snprintf(mname, sizeof mname, "module/%s", params[g][i]);
            w = ckpt_tensor_find(model, mname);
            ASSERT_TRUE(w != NULL && w->dtype == CKPT_DTYPE_BF16);
            ASSERT_OK(ckpt_tensor_read(w, 0, numel[g][i], CKPT_DTYPE_BF16, bf));
            for (k = 0; k < numel[g][i]; k++)
                ASSERT_EQ_INT(ckpt_f32_to_bf16(got[k]), bf[k]);
            off += numel[g][i];
        }
    }
    ASSERT_TRUE(ckpt_tensor_find(c, "lm_head.weight")->storage == ckpt_tensor_find(c, "embed.weight")->storage);
    ckpt_close(model);
    ckpt_close(c);
}
