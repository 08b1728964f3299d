/* The Hugging Face LLaMA-family API (include/ckpt/hf.h) over the families of
 * formats/families: a ckpt_hf_llama_dims is a family config in the fields hf.h has always
 * had, converted both ways here. */
#ifndef CKPT_HF_PRIVATE_H
#define CKPT_HF_PRIVATE_H

#include <ckpt/family.h>
#include <ckpt/graph.h>
#include <ckpt/hf.h>

/* The built-in family of f (ckpt_hf_family numbers the built-ins in index order); NULL for
 * a value that is no family. */
const ckpt_family *ckpt_hf__family(ckpt_hf_family f);

/* d as a config of its family (`where` names it in messages); CKPT_EINVALID naming where
 * for a d of no family. */
int ckpt_hf__config_of(const ckpt_hf_llama_dims *d, const char *where, ckpt_family_config **out);

/* The config.json at path as a config of the family it names (what ckpt_hf_llama_dims cannot
 * hold too: Gemma 3's linear RoPE scaling). */
int ckpt_hf__config_read(const char *path, ckpt_family_config **out);

/* The fields of c over d (d->dtype kept where c names no dtype). */
int ckpt_hf__dims_of(const ckpt_family_config *c, ckpt_hf_llama_dims *d);

/* FP8 block-scaled checkpoints (hf_fp8.c). In config.json text *text (replaced when it
 * changes): the block sizes of an FP8 quantization_config, which is removed, the weights
 * being read as bf16; {0, 0} without one. Refuses an FP8 config it cannot read, naming path. */
int ckpt_hf__fp8_config(const char *path, char **text, int64_t block[2]);
/* t of ck (in file) as the graph reads it given block sizes from ckpt_hf__fp8_config: an FP8
 * weight dequantised with its scale, a scale checked against its weight and consumed (*out
 * NULL), anything else as it is; with CKPT_FP8_KEEP, weights and scales checked alike and
 * read as they are stored. */
int ckpt_hf__fp8_node(ckpt_graph *g, const ckpt_ckpt *ck, const char *file, const ckpt_tensor *t,
                      const int64_t block[2], ckpt_fp8_mode mode, const ckpt_node **out);

#endif
