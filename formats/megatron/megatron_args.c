/* Megatron's `args`: an argparse.Namespace, pickled as NEWOBJ(argparse.Namespace, ()) followed
 * by BUILD with the attribute dict, read here and set. Checkpoints written by other tools need
 * one that Megatron accepts when it resumes or fine-tunes (check_checkpoint_args,
 * load_args_from_checkpoint). */
#include "megatron_private.h"

#include <stdint.h>
#include <string.h>

const ckpt_value *ckpt_megatron__namespace_dict(const ckpt_value *ns)
{
    if (!ns)
        return NULL;
    if (ns->kind == CKPT_VAL_OBJECT && ns->u.obj.state && ns->u.obj.state->kind == CKPT_VAL_DICT)
        return ns->u.obj.state;
    return ns->kind == CKPT_VAL_DICT ? ns : NULL;
}

int64_t ckpt_megatron__arg_int(const ckpt_value *args, const char *name, int64_t fallback)
{
    const ckpt_value *d = ckpt_megatron__namespace_dict(args), *v;

    v = d ? ckpt_value_dict_get(d, name) : NULL;
    if (v && v->kind == CKPT_VAL_INT)
        return v->u.integer;
    if (v && v->kind == CKPT_VAL_BOOL)
        return v->u.boolean;
    return fallback;
}

int64_t ckpt_megatron__num_experts(const ckpt_value *args)
{
    /* Megatron-LM's --num-experts; num_moe_experts is the TransformerConfig's name for it */
    return ckpt_megatron__arg_int(args, "num_experts", ckpt_megatron__arg_int(args, "num_moe_experts", 0));
}

int64_t ckpt_megatron__true_vocab(const ckpt_value *args)
{
    const ckpt_value *tok = ckpt_megatron_arg(args, "tokenizer_type");
    int64_t v = ckpt_megatron__arg_int(args, "vocab_size", 0);

    /* --vocab-size counts the NullTokenizer's tokens without its end-of-document token, whose
     * id is vocab_size: the embedding holds one row more */
    if (v > 0 && tok && ckpt_value_is_str(tok, "NullTokenizer"))
        return v + 1;
    return v;
}

int64_t ckpt_megatron_padded_vocab(int64_t true_vocab, int64_t divisible_by, int tp)
{
    int64_t multiple = (divisible_by > 0 ? divisible_by : 1) * (tp > 0 ? tp : 1);
    return (true_vocab + multiple - 1) / multiple * multiple;
}


static int set_value(ckpt_arena *a, ckpt_value *args, const char *name, ckpt_value *v)
{
    ckpt_value *d = (ckpt_value *)ckpt_megatron__namespace_dict(args);
    ckpt_value *key = ckpt_value_new_str(a, name, strlen(name));

    if (!d)
        return ckpt_error_set(CKPT_EINVALID, "args: not a Namespace");
    return key && v ? ckpt_value_dict_set(a, d, key, v) : CKPT_ENOMEM;
}

int ckpt_megatron_args_set_int(ckpt_arena *a, ckpt_value *args, const char *name, int64_t v)
{
    return set_value(a, args, name, ckpt_value_new_int(a, v));
}

int ckpt_megatron_args_set_float(ckpt_arena *a, ckpt_value *args, const char *name, double v)
{
    return set_value(a, args, name, ckpt_value_new_float(a, v));
}

int ckpt_megatron_args_set_bool(ckpt_arena *a, ckpt_value *args, const char *name, int v)
{
    return set_value(a, args, name, ckpt_value_new_bool(a, v != 0));
}

int ckpt_megatron_args_set_str(ckpt_arena *a, ckpt_value *args, const char *name, const char *v)
{
    return set_value(a, args, name, ckpt_value_new_str(a, v, strlen(v)));
}

int ckpt_megatron_args_set_none(ckpt_arena *a, ckpt_value *args, const char *name)
{
    return set_value(a, args, name, ckpt_value_new(a, CKPT_VAL_NONE));
}

int ckpt_megatron_args_set_int_pair(ckpt_arena *a, ckpt_value *args, const char *name, int64_t x, int64_t y)
{
    ckpt_value *t = ckpt_value_new(a, CKPT_VAL_TUPLE);
    ckpt_value **items = ckpt_arena_alloc(a, 2 * sizeof *items);

    if (!t || !items || !(items[0] = ckpt_value_new_int(a, x)) || !(items[1] = ckpt_value_new_int(a, y)))
        return CKPT_ENOMEM;
    t->u.seq.items = items;
    t->u.seq.n = t->u.seq.cap = 2;
    return set_value(a, args, name, t);
}

int ckpt_megatron_args_set_int_list(ckpt_arena *a, ckpt_value *args, const char *name, const int64_t *v, size_t n)
{
    ckpt_value *l = ckpt_value_new(a, CKPT_VAL_LIST);
    ckpt_value **items = n <= SIZE_MAX / sizeof *items ? ckpt_arena_alloc(a, (n ? n : 1) * sizeof *items) : NULL;
    size_t i;

    if (!l || !items)
        return CKPT_ENOMEM;
    for (i = 0; i < n; i++)
        if (!(items[i] = ckpt_value_new_int(a, v[i])))
            return CKPT_ENOMEM;
    l->u.seq.items = items;
    l->u.seq.n = l->u.seq.cap = n;
    return set_value(a, args, name, l);
}

int ckpt_megatron_args_set_dtype(ckpt_arena *a, ckpt_value *args, const char *name, ckpt_dtype dtype)
{
    return set_value(a, args, name, ckpt_value_new_global(a, "torch", ckpt_dtype_name(dtype)));
}

const ckpt_value *ckpt_megatron_arg(const ckpt_value *args, const char *name)
{
    const ckpt_value *d = ckpt_megatron__namespace_dict(args);
    return d ? ckpt_value_dict_get(d, name) : NULL;
}

int ckpt_megatron_args_new(ckpt_arena *a, ckpt_value **out)
{
    ckpt_value *ns = ckpt_value_new(a, CKPT_VAL_OBJECT);
    int rc;

    *out = NULL;
    if (!ns)
        return CKPT_ENOMEM;
    ns->u.obj.how = CKPT_OBJ_NEWOBJ;
    ns->u.obj.callable = ckpt_value_new_global(a, "argparse", "Namespace");
    ns->u.obj.args = ckpt_value_new(a, CKPT_VAL_TUPLE);
    ns->u.obj.state = ckpt_value_new(a, CKPT_VAL_DICT);
    if (!ns->u.obj.callable || !ns->u.obj.args || !ns->u.obj.state)
        return CKPT_ENOMEM;
    /* what a run at one rank per axis with Megatron's defaults would record */
    if ((rc = ckpt_megatron_args_set_int(a, ns, "tensor_model_parallel_size", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, ns, "pipeline_model_parallel_size", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_none(a, ns, "virtual_pipeline_model_parallel_size")) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, ns, "expert_model_parallel_size", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, ns, "make_vocab_size_divisible_by", 128)) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, ns, "ckpt_format", "torch")) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, ns, "use_distributed_optimizer", 0)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, ns, "consumed_train_samples", 0)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, ns, "skipped_train_samples", 0)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, ns, "consumed_valid_samples", 0)) < 0)
        return rc;
    *out = ns;
    return 0;
}
