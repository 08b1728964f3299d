/* Galvatron's strategy files, {"pp_size": M, "tp_size_list": [N, N, ...]}, as the layout a
 * Megatron checkpoint is resharded to. Galvatron may give every layer its own TP size; a
 * Megatron checkpoint has one, so only uniform lists are read. */
#include <ckpt/megatron.h>
#include <ckpt/sys/common.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A strategy file is a few lines; anything far larger is not one. */
#define STRATEGY_MAX_BYTES (1 << 20)

static int read_text(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    size_t len = 0;
    int rc = 0;

    *out = NULL;
    if (!f)
        return ckpt_error_setc(errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO, CKPT_ERRCLASS_OS, "%s: %s", path,
                               strerror(errno));
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        rc = ckpt_error_setc(CKPT_EIO, CKPT_ERRCLASS_OS, "%s: cannot read it", path);
    else if (st.st_size > STRATEGY_MAX_BYTES)
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: %lld bytes is too large for a strategy file",
                             path, (long long)st.st_size);
    else if (!(*out = calloc(1, (len = (size_t)st.st_size) + 1)))
        rc = ckpt_error_oom();
    else if (fread(*out, 1, len, f) != len)
        rc = ckpt_error_setc(CKPT_EIO, CKPT_ERRCLASS_OS, "%s: cannot read it", path);
    fclose(f);
    if (rc < 0) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

int ckpt_megatron_strategy_read(int *tp, int *pp, const char *path)
{
    cJSON *j, *pps, *tps, *t;
    char *text;
    int rc, first = -1;

    if ((rc = read_text(path, &text)) < 0)
        return rc;
    j = cJSON_Parse(text);
    free(text);
    pps = cJSON_GetObjectItemCaseSensitive(j, "pp_size");
    tps = cJSON_GetObjectItemCaseSensitive(j, "tp_size_list");
    if (!cJSON_IsNumber(pps) || !cJSON_IsArray(tps) || cJSON_GetArraySize(tps) == 0) {
        cJSON_Delete(j);
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: expected {\"pp_size\": M, \"tp_size_list\": [N, ...]}", path);
    }
    cJSON_ArrayForEach(t, tps) {
        if (!cJSON_IsNumber(t) || (first >= 0 && t->valueint != first)) {
            cJSON_Delete(j);
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT, "%s: tp_size_list must hold one size "
                                   "for every layer (per-layer TP sizes are not supported)", path);
        }
        first = t->valueint;
    }
    *pp = pps->valueint;
    *tp = first;
    cJSON_Delete(j);
    return 0;
}
