/* Mapping rules as data: which input tensors become which output tensors, through which
 * graph operations. A map is JSON (formats/maps/ holds the built-in ones; the file format
 * is described in formats/maps/README.md). Every map can be inverted: the inverse of
 * llama_pd2te is te2pd, derived from the same file rather than written twice. */
#ifndef CKPT_RULES_H
#define CKPT_RULES_H

#include "graph.h"

CKPT_BEGIN_DECL

typedef struct ckpt_map ckpt_map;

/* Parse a map from JSON text; `origin` names it in errors (a path, or "llama_pd2te"). */
CKPT_EXTERN(int) ckpt_map_parse(ckpt_map **out, const char *json, size_t len, const char *origin);
CKPT_EXTERN(int) ckpt_map_load(ckpt_map **out, const char *path);
/* A map built into the library by name ("llama_pd2te"), or the inverse of one by the
 * inverse's name ("llama_te2pd"). CKPT_ENOTFOUND for an unknown name. */
CKPT_EXTERN(int) ckpt_map_builtin(ckpt_map **out, const char *name);
/* Names of the built-in maps and their inverses, for --help. */
CKPT_EXTERN(size_t) ckpt_map_builtin_count(void);
CKPT_EXTERN(const char *) ckpt_map_builtin_at(size_t i);
/* The inverse map; CKPT_EUNSUPPORTED naming the rule and op that cannot be inverted. */
CKPT_EXTERN(int) ckpt_map_invert(const ckpt_map *m, ckpt_map **out);
CKPT_EXTERN(void) ckpt_map_free(ckpt_map *m);

CKPT_EXTERN(const char *) ckpt_map_name(const ckpt_map *m);
CKPT_EXTERN(const char *) ckpt_map_description(const ckpt_map *m);
/* What the map reads and writes ("PaddleNLP LLaMA", "Transformer Engine"). */
CKPT_EXTERN(const char *) ckpt_map_source_kind(const ckpt_map *m);
CKPT_EXTERN(const char *) ckpt_map_target_kind(const ckpt_map *m);
/* Optional output layouts the map can produce on request (ckpt_map_apply's `variants`), by
 * name: the inverted normalize rules of one name (a fused weight's and its fused bias's) are
 * one variant. */
CKPT_EXTERN(size_t) ckpt_map_variant_count(const ckpt_map *m);
CKPT_EXTERN(const char *) ckpt_map_variant_at(const ckpt_map *m, size_t i);

/* Model hyper-parameters (integers) that rules refer to by name: num_attention_heads,
 * num_key_value_heads, hidden_size, ... */
typedef struct ckpt_map_params ckpt_map_params;

CKPT_EXTERN(int) ckpt_map_params_new(ckpt_map_params **out);
CKPT_EXTERN(void) ckpt_map_params_free(ckpt_map_params *p);
/* Set (or replace) a value. */
CKPT_EXTERN(int) ckpt_map_params_set(ckpt_map_params *p, const char *name, int64_t value);
/* 1 and *value when set, else 0. */
CKPT_EXTERN(int) ckpt_map_params_get(const ckpt_map_params *p, const char *name, int64_t *value);
/* Take every top-level integer of a JSON object (a model's config.json) that is not set yet,
 * so values set before (command-line flags) win. */
CKPT_EXTERN(int) ckpt_map_params_load_json(ckpt_map_params *p, const char *path);
/* Whether the map could use every parameter it may need (the names missing, comma
 * separated, in *missing; borrowed until the next call). Derived parameters count as
 * present when their inputs are. */
CKPT_EXTERN(int) ckpt_map_params_complete(const ckpt_map *m, const ckpt_map_params *p, const char **missing);

/* Which side of the map a set of names is on: 0 when they are the map's source kind.
 * CKPT_EFORMAT otherwise, saying whether they look like the target kind (the other
 * direction was meant), like both, or like neither. */
CKPT_EXTERN(int) ckpt_map_detect(const ckpt_map *m, const char *const *names, size_t n);

/* One input tensor. `home` is the caller's tag for where it came from (a file index);
 * outputs inherit the home of their rule's first source. */
typedef struct ckpt_map_input {
    const char *name;
    const ckpt_node *node;
    size_t home;
} ckpt_map_input;

typedef struct ckpt_map_output {
    const char *name;
    const ckpt_node *node;
    size_t home;
    const char *rule; /* the rule that made it ("from -> to"), NULL when passed through */
} ckpt_map_output;

typedef struct ckpt_map_result ckpt_map_result;

/* Apply the map to one namespace of tensors (one file, or the files of one sharded
 * checkpoint). Names matched by no rule pass through unchanged, except under the map's
 * strict prefixes, where they are an error naming the tensor. Outputs come in input order:
 * each one where its rule's first source was. `variants`: NULL-terminated names of
 * optional layouts to produce, or NULL. Node construction happens in g. */
CKPT_EXTERN(int) ckpt_map_apply(const ckpt_map *m, const ckpt_map_params *params, ckpt_graph *g,
                                const ckpt_map_input *inputs, size_t n, const char *const *variants,
                                ckpt_map_result **out);
/* The inputs after the map's normalize rules alone: named as its rules expect them, so that a
 * check of a source's tensors sees one layout whichever the files were saved in (GPT-2's hub
 * names without "transformer."). Same conventions as ckpt_map_apply. */
CKPT_EXTERN(int) ckpt_map_normalize(const ckpt_map *m, const ckpt_map_params *params, ckpt_graph *g,
                                    const ckpt_map_input *inputs, size_t n, ckpt_map_result **out);
CKPT_EXTERN(size_t) ckpt_map_result_count(const ckpt_map_result *r);
CKPT_EXTERN(const ckpt_map_output *) ckpt_map_result_at(const ckpt_map_result *r, size_t i);
CKPT_EXTERN(void) ckpt_map_result_free(ckpt_map_result *r);

CKPT_END_DECL

#endif
