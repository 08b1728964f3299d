/* Expressions in family files ("hidden_size / num_heads", "num_kv_heads != num_heads"):
 * evaluated straight from their text over a config's fields, in int64 with overflow checks.
 * '/' must divide, because a size that does not is a config that describes no model. */
#include "family_private.h"

#include <stdio.h>
#include <string.h>

/* Deeper nesting than any formula in a family needs; bounds the recursion. */
#define EXPR_MAX_DEPTH 32

typedef struct parser {
    const ckpt_family *f;
    const ckpt_family_config *c; /* NULL: check only */
    const char *text, *where;
    size_t pos;
    int depth, is_bool;
    family_expr_fail *fail;
} parser;

typedef struct operand {
    int64_t v;
    char name[64]; /* the field it is, for messages; "" for a computed value */
} operand;

static int expr_or(parser *p, operand *out);

static void skip(parser *p)
{
    while (p->text[p->pos] == ' ')
        p->pos++;
}

static int syntax(const parser *p, const char *what)
{
    return ckpt_error_set(CKPT_EFORMAT, "%s: expression \"%s\": %s at offset %zu", p->where, p->text, what, p->pos);
}

static int is_ident(char ch, int first)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || (!first && ch >= '0' && ch <= '9');
}

static int field_value(parser *p, const char *name, size_t len, operand *out)
{
    const ckpt_value *v;

    snprintf(out->name, sizeof out->name, "%.*s", (int)len, name);
    out->v = 0;
    if (!ckpt_family__has_field(p->f, name, len))
        return syntax(p, "no field of the family has this name");
    if (!p->c)
        return 0;
    v = ckpt_family__get(p->c, out->name);
    if (v && v->kind == CKPT_VAL_INT)
        out->v = v->u.integer;
    else if (v && v->kind == CKPT_VAL_BOOL)
        out->v = v->u.boolean != 0;
    else {
        snprintf(p->fail->a, sizeof p->fail->a, "%s", out->name);
        return ckpt_error_set(CKPT_EINVALID, "%s: %s is not given (in \"%s\")", p->where, out->name, p->text);
    }
    return 0;
}

static int primary(parser *p, operand *out)
{
    const char *s;
    size_t n = 0;
    int rc;

    skip(p);
    s = p->text + p->pos;
    out->name[0] = 0;
    if (*s == '(') {
        if (++p->depth > EXPR_MAX_DEPTH)
            return syntax(p, "nested too deeply");
        p->pos++;
        if ((rc = expr_or(p, out)) < 0)
            return rc;
        skip(p);
        if (p->text[p->pos] != ')')
            return syntax(p, "')' expected");
        p->pos++;
        p->depth--;
        out->name[0] = 0;
        return 0;
    }
    if (*s >= '0' && *s <= '9') {
        out->v = 0;
        for (; s[n] >= '0' && s[n] <= '9'; n++) {
            if (out->v > (INT64_MAX - 9) / 10)
                return syntax(p, "number too large");
            out->v = out->v * 10 + (s[n] - '0');
        }
        p->pos += n;
        return 0;
    }
    if (!is_ident(*s, 1))
        return syntax(p, "a number, a field or '(' expected");
    while (is_ident(s[n], n == 0))
        n++;
    p->pos += n;
    return field_value(p, s, n, out);
}

static int unary(parser *p, operand *out)
{
    char op;
    int rc;

    skip(p);
    op = p->text[p->pos];
    if (op != '!' && op != '-')
        return primary(p, out);
    if (++p->depth > EXPR_MAX_DEPTH)
        return syntax(p, "nested too deeply");
    p->pos++;
    if ((rc = unary(p, out)) < 0)
        return rc;
    p->depth--;
    if (op == '!') {
        out->v = !out->v;
        p->is_bool = 1;
    } else if (out->v == INT64_MIN) {
        return syntax(p, "overflow");
    } else {
        out->v = -out->v;
    }
    out->name[0] = 0;
    return 0;
}

static int arith(parser *p, char op, operand *a, const operand *b)
{
    int64_t r = 0;
    int over = 0;

    if (!p->c)
        return 0;
    switch (op) {
    case '+': over = __builtin_add_overflow(a->v, b->v, &r); break;
    case '-': over = __builtin_sub_overflow(a->v, b->v, &r); break;
    case '*': over = __builtin_mul_overflow(a->v, b->v, &r); break;
    default:
        if (b->v == 0 || (op == '/' && a->v % b->v != 0)) {
            snprintf(p->fail->a, sizeof p->fail->a, "%s", a->name);
            snprintf(p->fail->b, sizeof p->fail->b, "%s", b->name);
            p->fail->va = a->v;
            p->fail->vb = b->v;
            p->fail->inexact = 1;
            return ckpt_error_set(CKPT_EINVALID, "%s: %lld is not a multiple of %lld (in \"%s\")", p->where,
                                  (long long)a->v, (long long)b->v, p->text);
        }
        if (a->v == INT64_MIN && b->v == -1)
            over = 1;
        else
            r = op == '/' ? a->v / b->v : a->v % b->v;
    }
    if (over)
        return ckpt_error_set(CKPT_EINVALID, "%s: \"%s\" overflows", p->where, p->text);
    a->v = r;
    return 0;
}

static int product(parser *p, operand *out)
{
    operand b;
    char op;
    int rc;

    if ((rc = unary(p, out)) < 0)
        return rc;
    for (;;) {
        skip(p);
        op = p->text[p->pos];
        if (op != '*' && op != '/' && op != '%')
            return 0;
        p->pos++;
        if ((rc = unary(p, &b)) < 0 || (rc = arith(p, op, out, &b)) < 0)
            return rc;
        out->name[0] = 0;
    }
}

static int sum(parser *p, operand *out)
{
    operand b;
    char op;
    int rc;

    if ((rc = product(p, out)) < 0)
        return rc;
    for (;;) {
        skip(p);
        op = p->text[p->pos];
        if (op != '+' && op != '-')
            return 0;
        p->pos++;
        if ((rc = product(p, &b)) < 0 || (rc = arith(p, op, out, &b)) < 0)
            return rc;
        out->name[0] = 0;
    }
}

static int compare(parser *p, operand *out)
{
    static const char *const ops[] = { "==", "!=", "<=", ">=", "<", ">" };
    operand b;
    size_t i;
    int rc;

    if ((rc = sum(p, out)) < 0)
        return rc;
    skip(p);
    for (i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strncmp(p->text + p->pos, ops[i], strlen(ops[i])) == 0)
            break;
    if (i == sizeof ops / sizeof ops[0])
        return 0;
    p->pos += strlen(ops[i]);
    if ((rc = sum(p, &b)) < 0)
        return rc;
    switch (i) {
    case 0: out->v = out->v == b.v; break;
    case 1: out->v = out->v != b.v; break;
    case 2: out->v = out->v <= b.v; break;
    case 3: out->v = out->v >= b.v; break;
    case 4: out->v = out->v < b.v; break;
    default: out->v = out->v > b.v; break;
    }
    out->name[0] = 0;
    p->is_bool = 1;
    return 0;
}

static int logic(parser *p, operand *out, const char *op, int (*next)(parser *, operand *))
{
    operand b;
    int rc;

    if ((rc = next(p, out)) < 0)
        return rc;
    for (;;) {
        skip(p);
        if (strncmp(p->text + p->pos, op, 2) != 0)
            return 0;
        p->pos += 2;
        if ((rc = next(p, &b)) < 0)
            return rc;
        out->v = op[0] == '&' ? (out->v && b.v) : (out->v || b.v);
        out->name[0] = 0;
        p->is_bool = 1;
    }
}

static int expr_and(parser *p, operand *out)
{
    return logic(p, out, "&&", compare);
}

static int expr_or(parser *p, operand *out)
{
    p->is_bool = 0;
    return logic(p, out, "||", expr_and);
}

int ckpt_family__expr(const ckpt_family *f, const ckpt_family_config *c, const char *text, const char *where,
                      int64_t *out, int *is_bool, family_expr_fail *fail)
{
    family_expr_fail ignored;
    parser p;
    operand r;
    int rc;

    memset(&p, 0, sizeof p);
    p.f = f;
    p.c = c;
    p.text = text;
    p.where = where;
    p.fail = fail ? fail : &ignored;
    memset(p.fail, 0, sizeof *p.fail);
    if ((rc = expr_or(&p, &r)) < 0)
        return rc;
    skip(&p);
    if (text[p.pos])
        return syntax(&p, "unexpected text");
    if (out)
        *out = r.v;
    if (is_bool)
        *is_bool = p.is_bool;
    return 0;
}
