/* Mapping rules, inside: a parsed map is plain data in one arena (patterns, expression
 * trees, op lists), so inverting it is rearranging that data, and applying it is walking it
 * over a table of named nodes. */
#ifndef CKPT_RULES_PRIVATE_H
#define CKPT_RULES_PRIVATE_H

#include <ckpt/rules.h>
#include <ckpt/sys/common.h>
#include <ckpt/value.h>

/* ---- expressions: integers, parameter names, + - * / and parentheses ---- */

typedef enum map_expr_kind {
    MAP_EXPR_NUM,
    MAP_EXPR_PARAM,
    MAP_EXPR_ADD,
    MAP_EXPR_SUB,
    MAP_EXPR_MUL,
    MAP_EXPR_DIV
} map_expr_kind;

typedef struct map_expr {
    map_expr_kind kind;
    int64_t num;                /* MAP_EXPR_NUM */
    const char *param;          /* MAP_EXPR_PARAM */
    const struct map_expr *a, *b;
    const char *text;           /* as written in the map, for messages */
} map_expr;

/* A derived parameter: "head_dim": "hidden_size / num_attention_heads". */
typedef struct map_param_def {
    const char *name;
    const map_expr *expr;
} map_param_def;

/* What an evaluation is for, so that its errors can say so. */
typedef struct map_eval {
    const ckpt_map *map;
    const ckpt_map_params *params;
    const char *rule;   /* the rule's label */
    const char *tensor; /* the anchor tensor */
} map_eval;

/* Parse text into an expression tree in arena a. On failure, CKPT_EFORMAT with the reason
 * after "<where>: ". */
int ckpt_rules__expr_parse(ckpt_arena *a, const char *text, const char *where, const map_expr **out);
/* A literal number (JSON integers in a map). */
const map_expr *ckpt_rules__expr_num(ckpt_arena *a, int64_t v);
/* Evaluate with int64 overflow checks and exact division. A parameter neither given nor
 * derivable is CKPT_ENOTFOUND, naming it and the rule. */
int ckpt_rules__expr_eval(const map_eval *ev, const map_expr *e, int64_t *out);
/* Call fn for every parameter name the expression refers to (repeats included). */
int ckpt_rules__expr_walk(const map_expr *e, int (*fn)(const char *name, void *payload), void *payload);
/* "name=value" for every parameter of e that has a value, appended after a ", " separator
 * (nothing when e names none). */
int ckpt_rules__expr_describe_params(const map_eval *ev, const map_expr *const *es, size_t n, ckpt_buf *out);

/* ---- name patterns: literal text and {captures} of one or more decimal digits ---- */

typedef struct map_part {
    const char *text; /* literal text, or the capture's identifier */
    size_t len;
    int capture;
    const char *shift; /* {M+param}: the capture is the index less the parameter; NULL: none */
} map_part;

typedef struct map_pattern {
    const char *text; /* as written */
    size_t n_parts;
    map_part *parts;
} map_pattern;

/* Captured digits: the capture's identifier and where its value lies in the matched name. */
typedef struct map_capture {
    const char *id;
    size_t id_len;
    const char *value;
    size_t value_len;
    int64_t shift; /* what a {M+param} anchor took off the digits (0: the digits as they are) */
} map_capture;

#define MAP_MAX_CAPTURES 8

int ckpt_rules__pattern_parse(ckpt_arena *a, const char *text, const char *where, map_pattern *out);
/* 1 when name matches the whole pattern (or starts with a match, for `prefix`), filling
 * caps (p's captures in order); 0 otherwise. */
int ckpt_rules__pattern_match(const map_pattern *p, const char *name, int prefix, map_capture *caps);
size_t ckpt_rules__pattern_capture_count(const map_pattern *p);
/* 1 when every capture of p is among caps[0..n). */
int ckpt_rules__pattern_covered(const map_pattern *p, const map_pattern *by);
/* The name p gives for the captured values (arena string), or NULL on OOM; params gives the
 * shifts of p's {M+param} parts, which ckpt_rules__pattern_shifts has found. */
char *ckpt_rules__pattern_expand(ckpt_arena *a, const map_pattern *p, const map_capture *caps, size_t n_caps,
                                 const ckpt_map_params *params);
/* After a match of p: each {M+param} capture's index less the parameter into its shift; 0
 * where one is below its parameter (no match), 1 where all are not, or an error naming
 * `rule` where a parameter is not known. */
int ckpt_rules__pattern_shift(const map_pattern *p, map_capture *caps, const ckpt_map_params *params, const char *rule);
/* 0 when every parameter p's {M+param} parts name is known, else an error naming `rule`. */
int ckpt_rules__pattern_params(const map_pattern *p, const ckpt_map_params *params, const char *rule);

/* ---- operations ---- */

typedef enum map_op_kind {
    MAP_OP_TRANSPOSE,
    MAP_OP_CONCAT,
    MAP_OP_SPLIT,
    MAP_OP_DEINTERLEAVE,
    MAP_OP_INTERLEAVE,
    MAP_OP_RESHAPE,
    MAP_OP_PAD,
    MAP_OP_UNPAD,
    MAP_OP_CAST
} map_op_kind;

typedef struct map_op {
    map_op_kind kind;
    int axis;
    int n_perm;                   /* transpose: 0 = swap the two axes of a 2-D tensor */
    int perm[CKPT_MAX_DIMS];
    size_t n_exprs;               /* concat/split parts, (de)interleave blocks, reshape shape */
    const map_expr **exprs;
    size_t n_equal;               /* split into this many equal parts (the inverse of a concat without parts) */
    size_t n_inverse;             /* reshape: inverse_shape; 0 = none */
    const map_expr **inverse;
    const map_expr *from, *to;    /* pad/unpad lengths */
    ckpt_dtype dtype, inverse_dtype; /* cast; inverse_dtype may be CKPT_DTYPE_INVALID */
} map_op;

const char *ckpt_rules__op_name(map_op_kind kind);

typedef struct map_rule {
    const char *name;   /* NULL when unnamed (required for normalize rules) */
    const char *label;  /* name, or "<from anchor> -> <to, ...>" */
    size_t n_from, n_to, n_ops;
    map_pattern *from;  /* from[0] is the anchor */
    map_pattern *to;
    map_op *ops;
    /* the rule applies only where this tensor (the anchor's captures filled in) is an input too;
     * inverse_when_present is the inverse's, swapped in by ckpt_map_invert. NULL: always */
    map_pattern *when_present, *inverse_when_present;
} map_rule;

typedef struct map_rule_list {
    size_t n;
    map_rule *v;
} map_rule_list;

struct ckpt_map {
    ckpt_arena *arena;
    const char *json;   /* the text it was parsed from, so that it can be parsed again */
    size_t json_len;
    const char *origin;
    int inverted;       /* this is the inverse of the map the text describes */
    const char *variant; /* the "variants" entry applied, or NULL */
    const char *name, *description, *source_kind, *target_kind;
    const char *inverse_name, *inverse_description;
    const char *detect_source, *detect_target; /* NULL: no detection */
    size_t n_params;
    map_param_def *params;
    size_t n_strict, n_inverse_strict;
    map_pattern *strict, *inverse_strict; /* names under these must be matched by a rule */
    int has_inverse_strict;               /* else the inverse keeps `strict` */
    map_rule_list normalize; /* applied first, where they match */
    map_rule_list rules;
    map_rule_list variants;  /* optional outputs, applied last on request */
    const struct ckpt_parallel_spec *parallel; /* the "parallel" section; NULL when there is none */
};

/* Parse as written (inverted = 0) or as its inverse. */
int ckpt_rules__map_parse(ckpt_map **out, const char *json, size_t len, const char *origin, int inverted);
/* The same with one of the map's "variants" applied (NULL: none). */
int ckpt_rules__map_parse_variant(ckpt_map **out, const char *json, size_t len, const char *origin, int inverted,
                                  const char *variant);
/* Turn a freshly parsed map into its inverse, in place. */
int ckpt_rules__map_invert_in_place(ckpt_map *m);
/* Set rule->label from its name or its patterns. */
int ckpt_rules__rule_label(ckpt_arena *a, map_rule *rule);
/* The derived parameter called name, or NULL. */
const map_param_def *ckpt_rules__param_def(const ckpt_map *m, const char *name);

/* Apply one op to a list of nodes: in[0..n_in) -> out[0..*n_out). out has room for
 * ckpt_rules__op_out_count(op, n_in) nodes. */
size_t ckpt_rules__op_out_count(const map_op *op, size_t n_in);
int ckpt_rules__op_run(const map_eval *ev, ckpt_graph *g, const map_op *op, const ckpt_node *const *in,
                       size_t n_in, const ckpt_node **out);

/* ---- reading maps from JSON (cJSON's type, declared here so that users of this header
 * need not include cJSON) ---- */

struct cJSON;

/* Room for "<origin>: rules[3] (name): ops[1]" in messages. */
#define MAP_WHERE_MAX 512

/* Format a location for messages ("<origin>: rules[3]"), cut to cap. */
void ckpt_rules__where(char *buf, size_t cap, const char *fmt, ...) CKPT_FORMAT_PRINTF(3, 4);
int ckpt_rules__json_fail(const char *where, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);
/* Every key of obj is in allowed (NULL-terminated) and appears once. */
int ckpt_rules__json_keys(const struct cJSON *obj, const char *const *allowed, const char *where);
int ckpt_rules__json_string(ckpt_arena *a, const struct cJSON *item, const char *key, const char *where,
                            const char **out);
/* obj[key] copied, or dflt when absent. */
int ckpt_rules__json_optional(ckpt_arena *a, const struct cJSON *obj, const char *key, const char *dflt,
                              const char *where, const char **out);
/* 1 when item is an integral JSON number that a double holds exactly. */
int ckpt_rules__json_int(const struct cJSON *item, int64_t *out);
/* An integer or an expression string. */
int ckpt_rules__json_expr(ckpt_arena *a, const struct cJSON *item, const char *where, const map_expr **out);
int ckpt_rules__json_expr_list(ckpt_arena *a, const struct cJSON *item, const char *key, const char *where,
                               size_t *n_out, const map_expr ***out);
/* Letters, digits and '_' (and '-', '.' with allow_dash). */
int ckpt_rules__is_name(const char *s, int allow_dash);
/* One op; *n_nodes is how many tensors there are before it, and after it on return. */
int ckpt_rules__parse_op(ckpt_arena *a, const struct cJSON *obj, const char *where, map_op *op, size_t *n_nodes);

/* ---- built-in maps (generated from formats/maps/<name>.json at build time) ---- */

typedef struct map_builtin {
    const char *name;
    const char *inverse_name;
    const char *json;
    size_t len;
    const char *variant; /* an alias of a map's variant; NULL for the map itself */
} map_builtin;

extern const map_builtin ckpt_rules__builtins[];
extern const size_t ckpt_rules__builtin_n;

#endif
