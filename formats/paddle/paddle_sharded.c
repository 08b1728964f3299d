/* Sharded saves of PaddleNLP's trainer (sharding stage 1 with save_sharded_model): each
 * sharding rank's model file holds the parameters that rank owns, less those with a master
 * weight; model_meta.json names every parameter of a TP/PP rank, in state-dict order. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* model_meta.json of a sharded save: per "tpXX_ppYY", the rank's structure_name_mapping, the
 * names of every parameter, those left out of the model files included. */
int ckpt_paddle__read_model_meta(ckpt_paddle_model *m, const ckpt_member *mb)
{
    const cJSON *metas, *e;
    ckpt_file *f = NULL;
    int rc;

    if ((rc = ckpt_file_open(&f, mb->path)) < 0)
        return rc;
    m->meta = f->size ? cJSON_ParseWithLength((const char *)f->data, (size_t)f->size) : NULL;
    ckpt_file_close(f);
    m->meta_path = mb->path;
    if (!cJSON_IsObject(m->meta))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: not a JSON object", mb->path);
    metas = cJSON_GetObjectItemCaseSensitive(m->meta, "sharding_metas");
    if (!cJSON_IsObject(metas))
        return 0;
    cJSON_ArrayForEach(e, metas) {
        const cJSON *map = cJSON_GetObjectItemCaseSensitive(e, "structure_name_mapping");
        int tp = -1, pp = -1;
        if (!e->string || sscanf(e->string, "tp%d_pp%d", &tp, &pp) != 2 || tp < 0 || tp >= m->info.tp || pp < 0 ||
            pp >= m->info.pp || !cJSON_IsObject(map))
            continue;
        ckpt_paddle__rank(m, tp, pp)->structure = map;
    }
    return 0;
}

/* A sharded save (model_meta.json) names every parameter of a rank, in state-dict order,
 * those its model files leave out included: they are declared first, in that order. */
int ckpt_paddle__declare_from_meta(ckpt_paddle_model *m)
{
    const cJSON *e;
    pd_entry *entry;
    int pp, rc;

    for (pp = 0; pp < m->info.pp; pp++) {
        const pd_rank *r = ckpt_paddle__rank(m, 0, pp);
        if (!r->structure)
            continue;
        cJSON_ArrayForEach(e, r->structure) {
            if (!e->string || !cJSON_IsString(e) || ckpt_paddle__find_entry(m, e->string) >= 0)
                continue;
            if ((rc = ckpt_paddle__new_entry(m, e->string, pp, &entry)) < 0)
                return rc;
            entry->tensor = 1;
            if (!(entry->shards = calloc((size_t)m->info.tp, sizeof *entry->shards)) ||
                !(entry->var = strdup(e->valuestring)))
                return ckpt_error_oom();
        }
    }
    return 0;
}

/* A sharded save with master weights leaves their parameters out of the model files, and
 * PaddleNLP rebuilds them as the master weights cast to bfloat16 when it loads: so here. */
int ckpt_paddle__recover_from_masters(ckpt_paddle_model *m)
{
    size_t i;
    int tp, rc;

    for (i = 0; i < m->n_entries; i++) {
        pd_entry *e = &m->entries[i];
        const pd_state *master = e->states ? &e->states[PD_MAX_KINDS] : NULL;
        for (tp = 0; e->tensor && master && master->shards && tp < m->info.tp; tp++)
            if (!e->shards[tp] && master->shards[tp] &&
                (rc = ckpt_node_cast(m->g, master->shards[tp], CKPT_DTYPE_BF16, &e->shards[tp])) < 0)
                return rc;
    }
    return 0;
}

