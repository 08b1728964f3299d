/* config.json of a PaddleNLP checkpoint written at another TP/PP layout: the source's text
 * with tensor_parallel_degree and the architecture changed in place, every other byte kept. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>

#include <stdio.h>
#include <string.h>

/* PaddleNLP's config.json is json.dumps(indent=2, sort_keys=True): one top-level key per
 * line, "\n  \"key\": value". The line of `key` (its start, and the start of the next top-level
 * line or of the closing brace), or where it would go in key order. */
static int find_key_line(const char *text, const char *key, const char **line, const char **next)
{
    size_t klen = strlen(key);
    const char *p = text;

    *line = *next = NULL;
    while ((p = strstr(p, "\n  \"")) != NULL) {
        const char *name = p + 4, *end = strchr(name, '"');
        int c;
        if (!end)
            break;
        c = strncmp(name, key, klen < (size_t)(end - name) ? (size_t)(end - name) : klen);
        if (c == 0 && (size_t)(end - name) != klen)
            c = (size_t)(end - name) < klen ? -1 : 1;
        if (c >= 0) {
            const char *after = strstr(end, "\n  \"");
            *line = p;
            *next = after ? after : strstr(end, "\n}");
            return c == 0;
        }
        p = end;
    }
    *line = strstr(text, "\n}");
    return 0;
}

int ckpt_paddle__set_config_key(const char *text, const char *key, const char *value_json, ckpt_buf *out)
{
    const char *line, *next;
    int found = find_key_line(text, key, &line, &next), rc = 0;

    if (!line || (found && !next))
        return ckpt_buf_puts(out, text);
    if (found) {
        /* the line's own comma stays with it unless it was the last one */
        int last = next[1] == '}';
        rc = ckpt_buf_append(out, text, (size_t)(line - text));
        if (rc == 0 && value_json)
            rc = ckpt_buf_printf(out, "\n  \"%s\": %s%s", key, value_json, last ? "" : ",");
        else if (rc == 0 && last && out->len && out->data[out->len - 1] == ',')
            out->len--;
        return rc == 0 ? ckpt_buf_puts(out, next) : rc;
    }
    if (!value_json)
        return ckpt_buf_puts(out, text);
    if (line[1] == '}') {
        /* the new last key: the one before it gets a comma */
        rc = ckpt_buf_append(out, text, (size_t)(line - text));
        if (rc == 0)
            rc = ckpt_buf_printf(out, ",\n  \"%s\": %s", key, value_json);
        return rc == 0 ? ckpt_buf_puts(out, line) : rc;
    }
    rc = ckpt_buf_append(out, text, (size_t)(line - text));
    if (rc == 0)
        rc = ckpt_buf_printf(out, "\n  \"%s\": %s,", key, value_json);
    return rc == 0 ? ckpt_buf_puts(out, line) : rc;
}

/* config.json as PaddleNLP's save_pretrained writes it at layout t: tensor_parallel_degree
 * absent at TP 1 without a pipeline (its default) and, for PaddleNLP 3, at TP 1 with one, else
 * the TP size; the architecture the
 * pipeline model (LlamaForCausalLMPipe, Qwen2ForCausalLMPipe) records when PP > 1. */
int ckpt_paddle__config_for(const ckpt_paddle_model *m, const ckpt_paddle_target *t, ckpt_buf *out)
{
    ckpt_buf step = CKPT_BUF_INIT;
    char degree[32];
    char arch[96], other[96];
    const char *at;
    int rc;

    snprintf(degree, sizeof degree, "%d", t->tp);
    /* LlamaForCausalLMPipe sets 1 at TP 1, which PaddleNLP 3, where 1 is the default, leaves out */
    if ((rc = ckpt_paddle__set_config_key(m->config_text, "tensor_parallel_degree",
                             t->tp > 1 || (t->pp > 1 && ckpt_paddle__config_major(m) < 3) ? degree : NULL, &step)) <
        0)
        goto done;
    snprintf(arch, sizeof arch, "\"%s\"", t->pp > 1 ? m->family->pipe_cls : m->family->cls);
    snprintf(other, sizeof other, "\"%s\"", t->pp > 1 ? m->family->cls : m->family->pipe_cls);
    /* the architectures list names the class; other model families are left as they are */
    if ((at = strstr((const char *)step.data, other)) != NULL) {
        rc = ckpt_buf_append(out, step.data, (size_t)(at - (const char *)step.data));
        if (rc == 0)
            rc = ckpt_buf_puts(out, arch);
        if (rc == 0)
            rc = ckpt_buf_puts(out, at + strlen(other));
    } else {
        rc = ckpt_buf_append(out, step.data, step.len);
    }
done:
    ckpt_buf_dispose(&step);
    return rc;
}
