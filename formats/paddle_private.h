/* PaddleNLP directories: what the layout module and the conversion helpers share. */
#ifndef CKPT_FORMATS_PADDLE_PRIVATE_H
#define CKPT_FORMATS_PADDLE_PRIVATE_H

#include <ckpt/paddle.h>

#include <cjson/cJSON.h>

/* The names of a directory's entries but "." and "..", in strcmp order, so that every run
 * sees the same order; release them with ckpt_paddle__names_free. */
int ckpt_paddle__list(const char *dir, char ***names, size_t *n);
void ckpt_paddle__names_free(char **names, size_t n);
/* "dir/name", malloc'd; NULL when out of memory. */
char *ckpt_paddle__join(const char *dir, const char *name);
/* Read the index json at path: its tree (cJSON_Delete it) and, for each file its
 * weight_map names, the first entry that names it (the tensor is ->string, the file
 * ->valuestring), in that order; *firsts is malloc'd. Errors name the path: not JSON, no
 * weight_map object, a value that is not a file name. */
int ckpt_paddle__index_read(const char *path, cJSON **json, const cJSON ***firsts, size_t *n);

#endif
