/* PaddleNLP checkpoint directories: the "paddle" layout of checkpoint sets, and what a
 * conversion of their weights needs besides the member files (which files are converted
 * together, the index json rewritten, what is copied through and what is not).
 *
 * The layout (ckpt_set_open) lists the regular files of one directory, in name order:
 *
 *   model_state.pdparams, model_state.tpXX[_ppYY].pdparams   role "model", tp and pp from the
 *                                                            name (-1 when it has none)
 *   model_state*.pdparams that an index lists                role "model", shard: N-1 of the
 *                                                            name's "-0000N-of-0000M", else
 *                                                            the file's place in its index
 *   model_state.pdparams.index[.tpXX[_ppYY]].json            role "index"
 *   *.pdopt                                                  role "optimizer"
 *   every other file (config.json, tokenizer files)          role "other"
 *
 * An index that names a file which is not a model file of the directory, and a model file
 * that two indexes list, are errors of class CKPT_ERRCLASS_LAYOUT. */
#ifndef CKPT_PADDLE_H
#define CKPT_PADDLE_H

#include "set.h"

CKPT_BEGIN_DECL

typedef struct ckpt_paddle ckpt_paddle;

/* Model files that are converted together: those one index lists (q, k and v of a layer
 * may sit in different files), or one model file on its own. */
typedef struct ckpt_paddle_group {
    long index;          /* the index json's member; -1 for a model file on its own */
    const size_t *files; /* the model files' members; an index's in its order of first mention */
    size_t n_files;
} ckpt_paddle_group;

/* An entry of the directory that is neither a model file nor an index, and what a
 * conversion of the weights does with it. */
typedef struct ckpt_paddle_extra {
    const char *rel;  /* its name in the directory */
    const char *path; /* the path to copy it from */
    const char *skip; /* NULL: copied as it is; else why it is not (optimizer state, which
                         belongs to the source layout's parameters; subdirectories; anything
                         that is not a regular file) */
} ckpt_paddle_extra;

/* A directory opened as a set of layout "paddle", ready to be converted: every model file
 * opened (ckpt_set_member_open: nothing but the pickle metadata is read), every index
 * read, the other entries classified. The set must outlive the handle. */
CKPT_EXTERN(int) ckpt_paddle_open(ckpt_paddle **out, ckpt_set *set);
/* NULL-safe. */
CKPT_EXTERN(void) ckpt_paddle_close(ckpt_paddle *p);

/* The groups: those of the indexes in name order, then the lone model files in name order. */
CKPT_EXTERN(size_t) ckpt_paddle_group_count(const ckpt_paddle *p);
CKPT_EXTERN(const ckpt_paddle_group *) ckpt_paddle_group_at(const ckpt_paddle *p, size_t i);
/* In name order. */
CKPT_EXTERN(size_t) ckpt_paddle_extra_count(const ckpt_paddle *p);
CKPT_EXTERN(const ckpt_paddle_extra *) ckpt_paddle_extra_at(const ckpt_paddle *p, size_t i);

/* A group's index must list exactly the tensors of its files, each in the file that holds
 * it: CKPT_EFORMAT naming the index, the tensor and the files otherwise; 0 for a lone file. */
CKPT_EXTERN(int) ckpt_paddle_group_check(const ckpt_paddle *p, size_t group);

/* Append the group's index as it is after a conversion, formatted as Python's
 * json.dump(indent=4) writes it (PaddleNLP's own writer): weight_map first, names[i] ->
 * files[i] in this order, then the other fields of the input's index, with
 * metadata.total_size (if there is one) replaced by total_size. */
CKPT_EXTERN(int) ckpt_paddle_index_json(const ckpt_paddle *p, size_t group, const char *const *names,
                                        const char *const *files, size_t n, uint64_t total_size, ckpt_buf *out);

CKPT_END_DECL

#endif
