/* ckptconv pd2te / te2pd: the checkpoint directory as the commands see it. */
#ifndef CKPT_CLI_PD2TE_H
#define CKPT_CLI_PD2TE_H

#include "cli.h"

#include <cjson/cJSON.h>

/* One model_state*.pdparams file. */
typedef struct pd_model_file {
    char *name;   /* in the input directory */
    ckpt_ckpt *ck;
    size_t space; /* index into pd_dir.spaces */
} pd_model_file;

/* Files converted together: those one index json lists (q, k and v of a layer may sit in
 * different files), or a single file. */
typedef struct pd_space {
    char *index_name; /* the index json in the input directory, NULL for a lone file */
    cJSON *index;     /* parsed */
    size_t *files;    /* into pd_dir.models, in the index's order of first mention */
    size_t n_files;
} pd_space;

typedef struct pd_other {
    char *name;
    const char *why; /* NULL: copied as it is; else why it is skipped (static text) */
} pd_other;

typedef struct pd_dir {
    char *path;
    pd_model_file *models;
    size_t n_models;
    pd_space *spaces;
    size_t n_spaces;
    pd_other *others; /* every other entry, copied or skipped */
    size_t n_others;
} pd_dir;

/* Read the directory listing, the index files, and open every model file (lazily: nothing
 * but the pickle metadata is read). */
int pd_dir_open(pd_dir *d, const char *path);
void pd_dir_close(pd_dir *d);

/* The index json written for a space: weight_map first (names in `names` order, each to
 * files[i]), then the other fields of the input's index, metadata.total_size replaced by
 * total_size; written as Python's json.dump(indent=4) does. */
int pd_index_write(const char *path, const cJSON *input_index, const char *const *names,
                   const char *const *files, size_t n, uint64_t total_size);

/* Bytes of a tensor the graph computes. */
uint64_t pd_output_bytes(const ckpt_node *x);
/* --dry-run: per model file, every output tensor with its sources and rule; then the
 * index files, and the files copied and skipped. results[i] belongs to spaces[i]. */
void pd_print_plan(const pd_dir *d, ckpt_map_result *const *results);
/* The --json report, with the files copied and skipped; pd_report_file adds a converted
 * file (its tensors and their sources with with_tensors), pd_report_print prints it. */
cJSON *pd_report_new(const char *cmd, const char *in, const char *out, const char *map, int dry_run,
                     const pd_dir *d);
void pd_report_file(cJSON *report, const pd_model_file *f, size_t home, const ckpt_map_result *r,
                    const ckpt_convert_report *written, int with_tensors);
void pd_report_print(cJSON *report, double seconds);

#endif
