/* Model families, inside: a family is its JSON (formats/families/<name>.json, merged over
 * what it extends) kept as a cJSON tree, checked once when it is read and interpreted by
 * the calls of include/ckpt/family.h. */
#ifndef CKPT_FAMILY_PRIVATE_H
#define CKPT_FAMILY_PRIVATE_H

#include <ckpt/family.h>
#include <ckpt/sys/common.h>

#include <cjson/cJSON.h>

/* Sizes and counts past this are nonsense for any model (and keep products of two in int64). */
#define FAMILY_MAX_SIZE 2147483647ll
/* config.json is a few kilobytes; a bound keeps a mistaken path from being read whole. */
#define FAMILY_MAX_CONFIG_BYTES (16u << 20)
/* the most end-of-sequence tokens an eos_token_id list may name */
#define FAMILY_MAX_EOS_TOKENS 64
/* far past any model's, and a config.json that lists layers stays small */
#define FAMILY_MAX_LAYERS 100000

struct ckpt_family {
    cJSON *json;                  /* the merged family */
    const char *name, *title;
    const cJSON *hf, *config, *hf_config_out, *megatron, *paddle, *map_params, *extents, *hf_tensors, *verify;
    int owned;                    /* from ckpt_family_load */
};

typedef struct family_field {
    const char *name;
    ckpt_value *value;            /* CKPT_VAL_NONE: none */
    const char *absent;           /* the source's key it lacked, the value being the default; NULL: given */
} family_field;

struct ckpt_family_config {
    ckpt_arena *arena;
    const ckpt_family *family;
    const char *where;            /* the source, for messages (in arena) */
    family_field *fields;
    size_t n, cap;
};

/* Check a merged family and set its shortcuts (family_check.c). */
int ckpt_family__validate(ckpt_family *f, const char *where);

/* The built-in families, parsed once; index order. */
size_t ckpt_family__builtin_n(void);

/* The JSON texts embedded at build time (generated from formats/families). */
size_t ckpt_families__count(void);
const char *ckpt_families__name(size_t i);
const char *ckpt_families__json(size_t i, size_t *len);

/* ---- config values ---- */

/* A field's value, NULL when the config has no such field. */
const ckpt_value *ckpt_family__get(const ckpt_family_config *c, const char *name);
/* What a message about c names: its source, else the family. */
const char *ckpt_family__where(const ckpt_family *f, const ckpt_family_config *c);
int ckpt_family__set(ckpt_family_config *c, const char *name, ckpt_value *v);
int ckpt_family__set_int(ckpt_family_config *c, const char *name, int64_t v);
int ckpt_family__set_real(ckpt_family_config *c, const char *name, double v);
int ckpt_family__set_bool(ckpt_family_config *c, const char *name, int v);
int ckpt_family__set_str(ckpt_family_config *c, const char *name, const char *s);
int ckpt_family__set_none(ckpt_family_config *c, const char *name);
/* The field (set) holds its default because the source has no `key` (ckpt_family_config_defaulted). */
int ckpt_family__mark_default(ckpt_family_config *c, const char *name, const char *key);
/* An integer-like field (int or bool) or fallback when absent or none. */
int64_t ckpt_family__int(const ckpt_family_config *c, const char *name, int64_t fallback);
double ckpt_family__real(const ckpt_family_config *c, const char *name, double fallback);
const char *ckpt_family__str(const ckpt_family_config *c, const char *name);
int ckpt_family__new_config(ckpt_family_config **out, const ckpt_family *f, const char *where);

/* ---- expressions: integers and bools over fields (+ - * / % == != < <= > >= && || ! and
 * parentheses), '/' exact ---- */

/* What failed: a division that was not exact (a, b its operands as written, va, vb their
 * values) or a field that is none or absent (a). */
typedef struct family_expr_fail {
    char a[64], b[64];
    int64_t va, vb;
    int inexact;
} family_expr_fail;

/* Evaluate text over the fields of c (NULL: only check the syntax and that every name is in
 * the family f's fields). *is_bool tells whether the top operator compares or is logical.
 * Errors: CKPT_EFORMAT naming `where` for syntax, CKPT_EINVALID with *fail filled. */
int ckpt_family__expr(const ckpt_family *f, const ckpt_family_config *c, const char *text, const char *where,
                      int64_t *out, int *is_bool, family_expr_fail *fail);
/* Whether the family defines a field called name (a row, or one a generator sets). */
int ckpt_family__has_field(const ckpt_family *f, const char *name, size_t len);

/* ---- reading (family_config.c, family_gen.c) ---- */

/* The last of a repeated key, as Python's json reads it; null is absent. */
const cJSON *ckpt_family__field(const cJSON *cfg, const char *name);
/* A dotted path ("rope_parameters.rope_theta"); *last is its last component. */
const cJSON *ckpt_family__path(const cJSON *cfg, const char *path, const char **last);
int ckpt_family__get_int(const cJSON *v, const char *where, const char *name, int64_t lo, int64_t *out);
int ckpt_family__known_or(ckpt_buf *b); /* "llama, mistral or qwen2" */
/* How messages name a field in a framework: its first config.json key's last part
 * ("num_hidden_layers"), else the field's own name. */
const char *ckpt_family__key(const ckpt_family *f, const char *framework, const char *field);

typedef struct family_read {
    const ckpt_family *f;
    ckpt_family_config *c;
    const char *framework, *where;
    const cJSON *cfg;             /* HF, Paddle */
    const ckpt_value *args;       /* Megatron */
    int named;                    /* args.hf_model_type named the family */
} family_read;

/* A `$` row: type (HF, Paddle) or megatron source (Megatron). CKPT_ENOTFOUND for an
 * unknown generator (a load-time check). */
int ckpt_family__gen_read(family_read *r, const cJSON *row, const char *gen);
int ckpt_family__gen_known(const char *gen, int megatron);
/* $moe_layers (config.json) and $moe_layer_freq (args), family_moe.c: the 0/1 list of MoE
 * layers; 1 where gen is neither. */
int ckpt_family__moe_layers(family_read *r, const cJSON *row, const char *gen);

/* A config.json text of len bytes (no NUL needed) parsed, bounded and required to be an
 * object; cJSON_Delete(*out) after. */
int ckpt_family__parse_config(cJSON **out, const char *where, const char *json, size_t len);

/* Read a config.json text of len bytes (no NUL needed) as ckpt_family_config_read. */
int ckpt_family__read_text(ckpt_family_config **out, const ckpt_family *f, const char *framework, const char *where,
                           const char *json, size_t len);

/* Detect from a config.json text of len bytes. */
int ckpt_family__detect_text(const ckpt_family **out, const char *where, const char *json, size_t len);

/* ---- Megatron args ---- */
/* The family's megatron.require checks on args: the first failing one's message. */
int ckpt_family__megatron_require(const ckpt_family *f, const ckpt_value *args);
const ckpt_value *ckpt_family__arg(const ckpt_value *args, const char *name);
int ckpt_family__arg_set(const ckpt_value *args, const char *name);
/* The N of "every Nth layer is full attention" (layer i full exactly where (i + 1) % N == 0)
 * that the field attention_layers says, the field window_pattern first: 0 when no layer is
 * full, -1 when no N says them (family_args.c). */
int64_t ckpt_family__layer_every(const ckpt_family_config *c);

/* ---- verify features of DeepSeek-V3 style families (family_model_mla.c) ---- */

/* The `rope` field's type: one verify runs, else CKPT_EUNSUPPORTED naming it; YaRN's
 * parameters from verify.features.yarn; rope_interleaved from verify.features. */
int ckpt_family__rope_features(const ckpt_family *f, const ckpt_family_config *c, ckpt_model_config *out);
/* MLA's sizes (verify.features.mla), the dense MLP width (ffn) and the routing beyond the
 * score kind (expert bias, groups, scaling, shared experts, dense first layers). */
int ckpt_family__mla_features(const ckpt_family *f, const ckpt_family_config *c, ckpt_model_config *out);

#endif
