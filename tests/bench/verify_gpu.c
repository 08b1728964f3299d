/* One LLaMA-7B-shaped decoder layer on a backend, timed against the time its GEMMs take at
 * the rate cuBLAS reaches in the same run (the floor: a layer cannot be faster than its
 * matrix products). Also writes the synthetic checkpoints the benchmark runs on.
 * Not part of the build; tests/bench/verify_gpu.sh builds and runs it:
 *
 *   verify_gpu make DIR LAYERS KV_HEADS    a Hugging Face LLaMA directory: hidden 4096, ffn
 *                                          11008, 32 heads, KV_HEADS KV heads, vocabulary
 *                                          32000, LAYERS layers, bfloat16, random weights
 *   verify_gpu layer DIR TOKENS [DEVICE]   layer 0 of DIR on DEVICE (cuda, or cpu): the
 *                                          floor, then the layer's time (best of several)
 */
#include "run_private.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { HIDDEN = 4096, FFN = 11008, HEADS = 32, HEAD_DIM = 128, VOCAB = 32000 };

static uint64_t rng = 88172645463325252ull;

static uint16_t random_bf16(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    /* uniform in [-0.04, 0.04): weights of a trained model's scale */
    return ckpt_f32_to_bf16((float)((double)(rng >> 11) * 0x1.0p-53 * 0.08 - 0.04));
}

typedef struct st_tensor {
    char name[96];
    int64_t rows, cols; /* cols 0: a vector of rows */
    int ones;           /* norm weights */
} st_tensor;

/* One safetensors file of bf16 tensors. */
static int write_safetensors(const char *path, const st_tensor *t, size_t n)
{
    FILE *f = fopen(path, "wb");
    char *header = malloc(65536);
    size_t len = 0, i;
    uint64_t off = 0, hlen;
    int64_t k;

    if (!f || !header)
        return -1;
    len += (size_t)snprintf(header + len, 65536 - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (i = 0; i < n; i++) {
        uint64_t bytes = (uint64_t)t[i].rows * (uint64_t)(t[i].cols ? t[i].cols : 1) * 2;
        if (t[i].cols)
            len += (size_t)snprintf(header + len, 65536 - len,
                                    ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld,%lld],\"data_offsets\":[%llu,%llu]}",
                                    t[i].name, (long long)t[i].rows, (long long)t[i].cols, (unsigned long long)off,
                                    (unsigned long long)(off + bytes));
        else
            len += (size_t)snprintf(header + len, 65536 - len,
                                    ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld],\"data_offsets\":[%llu,%llu]}",
                                    t[i].name, (long long)t[i].rows, (unsigned long long)off,
                                    (unsigned long long)(off + bytes));
        off += bytes;
    }
    len += (size_t)snprintf(header + len, 65536 - len, "}");
    while (len % 8)
        header[len++] = ' ';
    hlen = len;
    fwrite(&hlen, 8, 1, f);
    fwrite(header, 1, len, f);
    for (i = 0; i < n; i++) {
        int64_t count = t[i].rows * (t[i].cols ? t[i].cols : 1);
        uint16_t buf[4096];
        for (k = 0; k < count; k++) {
            buf[k % 4096] = t[i].ones ? 0x3F80 : random_bf16();
            if (k % 4096 == 4095 || k == count - 1)
                fwrite(buf, 2, (size_t)(k % 4096) + 1, f);
        }
    }
    free(header);
    return fclose(f);
}

static int make(const char *dir, int layers, int kv)
{
    char path[4096];
    st_tensor t[9];
    FILE *f;
    int l;

    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!(f = fopen(path, "w")))
        return -1;
    fprintf(f,
            "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": %d, "
            "\"intermediate_size\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
            "\"num_hidden_layers\": %d, \"vocab_size\": %d, \"rms_norm_eps\": 1e-05, \"rope_theta\": 500000.0, "
            "\"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}\n",
            HIDDEN, FFN, HEADS, kv, HEAD_DIM, layers, VOCAB);
    fclose(f);
    memset(t, 0, sizeof t);
    snprintf(t[0].name, sizeof t[0].name, "model.embed_tokens.weight");
    t[0].rows = VOCAB, t[0].cols = HIDDEN;
    snprintf(t[1].name, sizeof t[1].name, "lm_head.weight");
    t[1].rows = VOCAB, t[1].cols = HIDDEN;
    snprintf(t[2].name, sizeof t[2].name, "model.norm.weight");
    t[2].rows = HIDDEN, t[2].ones = 1;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (write_safetensors(path, t, 3) < 0)
        return -1;
    for (l = 0; l < layers; l++) {
        static const char *const names[] = { "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                              "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
                                              "input_layernorm", "post_attention_layernorm" };
        int64_t rows[] = { HEADS * HEAD_DIM, (int64_t)kv * HEAD_DIM, (int64_t)kv * HEAD_DIM, HIDDEN, FFN, FFN, HIDDEN,
                           HIDDEN, HIDDEN };
        int64_t cols[] = { HIDDEN, HIDDEN, HIDDEN, HEADS * HEAD_DIM, HIDDEN, HIDDEN, FFN, 0, 0 };
        int i;
        for (i = 0; i < 9; i++) {
            snprintf(t[i].name, sizeof t[i].name, "model.layers.%d.%s.weight", l, names[i]);
            t[i].rows = rows[i];
            t[i].cols = cols[i];
            t[i].ones = cols[i] == 0;
        }
        snprintf(path, sizeof path, "%s/layer%05d.safetensors", dir, l);
        if (write_safetensors(path, t, 9) < 0)
            return -1;
    }
    /* an index over the files, as save_pretrained writes one */
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (!(f = fopen(path, "w")))
        return -1;
    fprintf(f, "{\"metadata\": {}, \"weight_map\": {\"model.embed_tokens.weight\": \"model.safetensors\", "
               "\"lm_head.weight\": \"model.safetensors\", \"model.norm.weight\": \"model.safetensors\"");
    for (l = 0; l < layers; l++) {
        static const char *const names[] = { "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                              "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
                                              "input_layernorm", "post_attention_layernorm" };
        int i;
        for (i = 0; i < 9; i++)
            fprintf(f, ", \"model.layers.%d.%s.weight\": \"layer%05d.safetensors\"", l, names[i], l);
    }
    fprintf(f, "}}\n");
    return fclose(f);
}

/* Device memory of n floats, uniform in [-1, 1) (uninitialised memory could hold denormals,
 * which would time something else). */
static int random_floats(run_ctx *r, int64_t n, void **out)
{
    float *host = malloc((size_t)n * sizeof *host);
    int64_t i;
    int rc;

    if (!host)
        return -1;
    for (i = 0; i < n; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        host[i] = (float)((double)(rng >> 11) * 0x1.0p-52 - 1.0);
    }
    rc = ckpt_run__alloc(r, (size_t)n * sizeof *host, out);
    if (rc == 0)
        rc = r->vt->upload(r->ctx, *out, host, (size_t)n * sizeof *host);
    free(host);
    return rc;
}

static double sync_now(run_ctx *r)
{
    if (r->vt->synchronize)
        r->vt->synchronize(r->ctx);
    return ckpt_run__now();
}

/* Seconds per call of the layer's seven products at `tokens` rows, each timed alone. */
static double gemm_floor(run_ctx *r, const ckpt_model_config *c, int64_t tokens, double *flops)
{
    int64_t shapes[7][2] = { { c->num_heads * c->head_dim, HIDDEN }, { c->num_kv_heads * c->head_dim, HIDDEN },
                             { c->num_kv_heads * c->head_dim, HIDDEN }, { HIDDEN, c->num_heads * c->head_dim },
                             { FFN, HIDDEN }, { FFN, HIDDEN }, { HIDDEN, FFN } };
    void *x, *w, *y;
    double total = 0, t0;
    int i, rep;
    uint16_t *host = malloc((size_t)FFN * HIDDEN * 2);
    int64_t k;

    *flops = 0;
    if (!host)
        return -1;
    for (k = 0; k < (int64_t)FFN * HIDDEN; k++)
        host[k] = random_bf16();
    if (random_floats(r, tokens * FFN, &x) < 0 || ckpt_run__alloc(r, (size_t)FFN * HIDDEN * 2, &w) < 0 ||
        ckpt_run__alloc(r, (size_t)(tokens * FFN) * 4, &y) < 0 ||
        r->vt->upload(r->ctx, w, host, (size_t)FFN * HIDDEN * 2) < 0) {
        free(host);
        return -1;
    }
    free(host);
    for (i = 0; i < 7; i++) {
        ckpt_backend_linear op = { tokens, shapes[i][0], shapes[i][1], x, w, CKPT_DTYPE_BF16, NULL, y, 0 };
        double best = INFINITY;
        r->vt->linear(r->ctx, &op);
        for (rep = 0; rep < 5; rep++) {
            t0 = sync_now(r);
            r->vt->linear(r->ctx, &op);
            best = fmin(best, sync_now(r) - t0);
        }
        total += best;
        *flops += 2.0 * (double)tokens * (double)shapes[i][0] * (double)shapes[i][1];
    }
    ckpt_run__release_all(r);
    return total;
}

static int layer(const char *dir, int64_t tokens, const char *device)
{
    ckpt_backend *b;
    ckpt_model *m;
    run_ctx r;
    vlayer l;
    float *x, *delta;
    double floor_s, flops, best = INFINITY;
    int rep, rc;

    if (ckpt_backend_open(&b, device, 0) < 0 || ckpt_model_open(&m, dir, NULL) < 0 ||
        ckpt_model__layer(m, 0, &l) < 0) {
        fprintf(stderr, "verify_gpu: %s\n", ckpt_error_last()->message);
        return 1;
    }
    memset(&r, 0, sizeof r);
    r.vt = ckpt_backend_vt(b);
    r.ctx = ckpt_backend_ctx(b);
    r.threads = 1;
    r.tokens = tokens;
    r.wdtype = CKPT_DTYPE_BF16;
    floor_s = gemm_floor(&r, &m->cfg, tokens, &flops);
    rc = floor_s > 0 ? ckpt_run__rope(&r, m) : -1;
    if (rc == 0)
        rc = random_floats(&r, tokens * HIDDEN, (void **)&x);
    if (rc == 0)
        rc = ckpt_run__alloc(&r, (size_t)(tokens * HIDDEN) * 4, (void **)&delta);
    /* ckpt_run__layer reads the weights and brings them to the device first; seconds_run
     * counts only what runs after that (the first run also sizes the activation buffers) */
    for (rep = 0; rep < 6 && rc == 0; rep++) {
        double before = r.seconds_run;
        rc = ckpt_run__layer(&r, m, &l, x, delta, NULL);
        if (rep > 0)
            best = fmin(best, r.seconds_run - before);
    }
    if (rc < 0) {
        fprintf(stderr, "verify_gpu: %s\n", ckpt_error_last()->message);
        return 1;
    }
    printf("device: %s\n", ckpt_backend_description(b));
    printf("layer: hidden %d, ffn %d, %lld heads, %lld KV heads, head_dim %lld, %lld tokens, bfloat16\n", HIDDEN, FFN,
           (long long)m->cfg.num_heads, (long long)m->cfg.num_kv_heads, (long long)m->cfg.head_dim, (long long)tokens);
    printf("gemm floor: %.3f ms (%.1f GFLOP at %.1f TFLOP/s, the rate the backend's linear reached on these shapes here)\n",
           floor_s * 1e3, flops / 1e9, flops / floor_s / 1e12);
    printf("layer: %.3f ms (%.2fx the floor)\n", best * 1e3, best / floor_s);
    ckpt_run__release_all(&r);
    ckpt_model__layer_dispose(&l);
    ckpt_model_close(m);
    ckpt_backend_close(b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "make") == 0)
        return make(argv[2], atoi(argv[3]), atoi(argv[4])) < 0 ? 1 : 0;
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "layer") == 0)
        return layer(argv[2], atoll(argv[3]), argc == 5 ? argv[4] : "cuda");
    fprintf(stderr, "usage: verify_gpu make DIR LAYERS KV_HEADS | verify_gpu layer DIR TOKENS [cuda|cpu]\n");
    return 2;
}
