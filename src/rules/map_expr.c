/* Integer expressions over model parameters ("hidden_size / num_attention_heads"). They
 * are parsed once with the map and evaluated per tensor, in int64 with overflow checks;
 * '/' must be exact, because a size that does not divide means the parameters do not
 * describe the tensor, and rounding would silently cut it wrong. */
#include "rules_private.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Deeper nesting than any size formula needs; bounds the parser's recursion. */
#define EXPR_MAX_DEPTH 32
/* A derived parameter may refer to others; chains longer than this are a cycle. */
#define EXPR_MAX_DERIVE 16

typedef struct expr_parser {
    ckpt_arena *arena;
    const char *text;
    size_t pos;
    int depth;
    const char *where;
} expr_parser;

static int is_ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_ident_char(char c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

static void skip_space(expr_parser *p)
{
    while (p->text[p->pos] == ' ' || p->text[p->pos] == '\t')
        p->pos++;
}

static int parse_fail(const expr_parser *p, const char *what)
{
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MAP, "%s: bad expression \"%s\": %s at column %zu", p->where,
                           p->text, what, p->pos + 1);
}

static map_expr *new_node(expr_parser *p, map_expr_kind kind, size_t start)
{
    map_expr *e = ckpt_arena_alloc(p->arena, sizeof *e);
    if (!e)
        return NULL;
    e->kind = kind;
    e->text = ckpt_arena_strndup(p->arena, p->text + start, p->pos - start);
    return e->text ? e : NULL;
}

static int parse_sum(expr_parser *p, const map_expr **out);

static int parse_primary(expr_parser *p, const map_expr **out)
{
    size_t start;
    map_expr *e;
    int rc;

    skip_space(p);
    start = p->pos;
    if (p->text[p->pos] == '(') {
        p->pos++;
        if ((rc = parse_sum(p, out)) < 0)
            return rc;
        skip_space(p);
        if (p->text[p->pos] != ')')
            return parse_fail(p, "expected ')'");
        p->pos++;
        return 0;
    }
    if (p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
        int64_t v = 0;
        while (p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
            if (CKPT_MUL_OVERFLOWS(v, (int64_t)10, &v) || CKPT_ADD_OVERFLOWS(v, (int64_t)(p->text[p->pos] - '0'), &v))
                return parse_fail(p, "number too large");
            p->pos++;
        }
        if (!(e = new_node(p, MAP_EXPR_NUM, start)))
            return CKPT_ENOMEM;
        e->num = v;
        *out = e;
        return 0;
    }
    if (is_ident_start(p->text[p->pos])) {
        while (is_ident_char(p->text[p->pos]))
            p->pos++;
        if (!(e = new_node(p, MAP_EXPR_PARAM, start)))
            return CKPT_ENOMEM;
        e->param = e->text;
        *out = e;
        return 0;
    }
    return parse_fail(p, p->text[p->pos] ? "expected a number, a parameter name or '('"
                                          : "unexpected end");
}

/* Binary operators by precedence, loosest first; each level is left-associative. */
static const struct {
    char op[2];
    map_expr_kind kind[2];
} levels[] = {
    { { '+', '-' }, { MAP_EXPR_ADD, MAP_EXPR_SUB } },
    { { '*', '/' }, { MAP_EXPR_MUL, MAP_EXPR_DIV } },
};
#define N_LEVELS (int)(sizeof levels / sizeof levels[0])

static int parse_level(expr_parser *p, int level, const map_expr **out)
{
    const map_expr *lhs, *rhs;
    size_t start = p->pos;
    int rc;

    if (level == N_LEVELS)
        return parse_primary(p, out);
    if (level == 0 && ++p->depth > EXPR_MAX_DEPTH)
        return parse_fail(p, "nested too deeply");
    if ((rc = parse_level(p, level + 1, &lhs)) < 0)
        return rc;
    for (;;) {
        map_expr *e;
        int which;
        skip_space(p);
        if (p->text[p->pos] == levels[level].op[0])
            which = 0;
        else if (p->text[p->pos] == levels[level].op[1])
            which = 1;
        else
            break;
        p->pos++;
        if ((rc = parse_level(p, level + 1, &rhs)) < 0)
            return rc;
        if (!(e = new_node(p, levels[level].kind[which], start)))
            return CKPT_ENOMEM;
        e->a = lhs;
        e->b = rhs;
        lhs = e;
    }
    if (level == 0)
        p->depth--;
    *out = lhs;
    return 0;
}

static int parse_sum(expr_parser *p, const map_expr **out)
{
    return parse_level(p, 0, out);
}

int ckpt_rules__expr_parse(ckpt_arena *a, const char *text, const char *where, const map_expr **out)
{
    expr_parser p = { a, text, 0, 0, where };
    const map_expr *e;
    int rc;

    if ((rc = parse_sum(&p, &e)) < 0)
        return rc;
    skip_space(&p);
    if (text[p.pos])
        return parse_fail(&p, "unexpected character");
    *out = e;
    return 0;
}

const map_expr *ckpt_rules__expr_num(ckpt_arena *a, int64_t v)
{
    map_expr *e = ckpt_arena_alloc(a, sizeof *e);
    char digits[24];
    int n;

    if (!e)
        return NULL;
    n = snprintf(digits, sizeof digits, "%" PRId64, v);
    e->kind = MAP_EXPR_NUM;
    e->num = v;
    e->text = ckpt_arena_strndup(a, digits, (size_t)n);
    return e->text ? e : NULL;
}

static int eval_fail_prefix(const map_eval *ev, int code, int klass, const char *what)
{
    return ckpt_error_setc(code, klass, "%s: rule %s of %s %s", ev->tensor, ev->rule, ckpt_map_name(ev->map), what);
}

static int eval(const map_eval *ev, const map_expr *e, int depth, int64_t *out);

static int eval_param(const map_eval *ev, const map_expr *e, int depth, int64_t *out)
{
    const map_param_def *def;
    char what[320];
    int rc;

    if (ckpt_map_params_get(ev->params, e->param, out))
        return 0;
    def = ckpt_rules__param_def(ev->map, e->param);
    if (!def) {
        snprintf(what, sizeof what, "needs model parameter '%s'", e->param);
        return eval_fail_prefix(ev, CKPT_ENOTFOUND, CKPT_ERRCLASS_MAP_PARAM, what);
    }
    if (depth >= EXPR_MAX_DERIVE) {
        snprintf(what, sizeof what, "derives parameter '%s' from itself", e->param);
        return eval_fail_prefix(ev, CKPT_EFORMAT, CKPT_ERRCLASS_MAP, what);
    }
    if ((rc = eval(ev, def->expr, depth + 1, out)) < 0)
        return rc;
    return 0;
}

static int eval(const map_eval *ev, const map_expr *e, int depth, int64_t *out)
{
    int64_t a, b;
    char what[512];
    int rc;

    switch (e->kind) {
    case MAP_EXPR_NUM:
        *out = e->num;
        return 0;
    case MAP_EXPR_PARAM:
        return eval_param(ev, e, depth, out);
    default:
        break;
    }
    if ((rc = eval(ev, e->a, depth, &a)) < 0 || (rc = eval(ev, e->b, depth, &b)) < 0)
        return rc;
    switch (e->kind) {
    case MAP_EXPR_ADD:
        if (CKPT_ADD_OVERFLOWS(a, b, out))
            break;
        return 0;
    case MAP_EXPR_SUB:
        if (__builtin_sub_overflow(a, b, out))
            break;
        return 0;
    case MAP_EXPR_MUL:
        if (CKPT_MUL_OVERFLOWS(a, b, out))
            break;
        return 0;
    default:
        if (b == 0) {
            snprintf(what, sizeof what, "divides by zero in \"%s\" (%" PRId64 " / 0)", e->text, a);
            return eval_fail_prefix(ev, CKPT_EFORMAT, CKPT_ERRCLASS_MAP, what);
        }
        if (a == INT64_MIN && b == -1)
            break;
        if (a % b) {
            snprintf(what, sizeof what, "has \"%s\" = %" PRId64 " / %" PRId64 ", which is not a whole number",
                     e->text, a, b);
            return eval_fail_prefix(ev, CKPT_EFORMAT, CKPT_ERRCLASS_MAP, what);
        }
        *out = a / b;
        return 0;
    }
    snprintf(what, sizeof what, "overflows 64-bit integers in \"%s\" (%" PRId64 " and %" PRId64 ")", e->text, a, b);
    return eval_fail_prefix(ev, CKPT_EFORMAT, CKPT_ERRCLASS_MAP, what);
}

int ckpt_rules__expr_eval(const map_eval *ev, const map_expr *e, int64_t *out)
{
    return eval(ev, e, 0, out);
}

int ckpt_rules__expr_walk(const map_expr *e, int (*fn)(const char *name, void *payload), void *payload)
{
    int rc;

    if (e->kind == MAP_EXPR_NUM)
        return 0;
    if (e->kind == MAP_EXPR_PARAM)
        return fn(e->param, payload);
    if ((rc = ckpt_rules__expr_walk(e->a, fn, payload)) < 0)
        return rc;
    return ckpt_rules__expr_walk(e->b, fn, payload);
}

typedef struct describe_state {
    const map_eval *ev;
    ckpt_buf *out;
    size_t start; /* where this description began, to skip names already listed */
    int depth;
} describe_state;

/* Derived parameters are described by the given values they come from. */
static int describe_one(const char *name, void *payload)
{
    describe_state *st = payload;
    const map_param_def *def;
    char item[200];
    int64_t v;
    int n, rc;

    if (!ckpt_map_params_get(st->ev->params, name, &v)) {
        def = ckpt_rules__param_def(st->ev->map, name);
        if (!def || st->depth >= EXPR_MAX_DERIVE)
            return 0;
        st->depth++;
        rc = ckpt_rules__expr_walk(def->expr, describe_one, st);
        st->depth--;
        return rc;
    }
    if (strlen(name) > 150)
        return 0;
    n = snprintf(item, sizeof item, "%s=%" PRId64, name, v);
    if (st->out->len > st->start && strstr((const char *)st->out->data + st->start, item))
        return 0;
    if (ckpt_buf_puts(st->out, ", ") < 0)
        return CKPT_ENOMEM;
    return ckpt_buf_append(st->out, item, (size_t)n);
}

int ckpt_rules__expr_describe_params(const map_eval *ev, const map_expr *const *es, size_t n, ckpt_buf *out)
{
    describe_state st = { ev, out, out->len, 0 };
    size_t i;
    int rc;

    for (i = 0; i < n; i++) {
        if (!es[i])
            continue;
        if ((rc = ckpt_rules__expr_walk(es[i], describe_one, &st)) < 0)
            return rc;
    }
    return 0;
}
