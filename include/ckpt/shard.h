/* Output sharding as the Hugging Face ecosystem does it: which tensors go into which file
 * of a sharded model, the files' names, and the index that maps each tensor to its file.
 *
 * The rules are those of huggingface_hub's split_torch_state_dict_into_shards, which
 * transformers' save_pretrained and DeepSpeed's zero_to_fp32 use, so that a model written
 * here is laid out file for file as theirs:
 *  - entries are taken in order; an entry larger than the maximum gets a file of its own;
 *    a new file starts when the next entry would overflow the current one;
 *  - entries sharing a storage (tied weights) count once, at the first of them, and are
 *    put into that one's file, after the file's own entries, storage by storage;
 *  - entries of zero bytes that share no storage all count as one shared storage: torch
 *    gives every empty storage the address 0, and that is how huggingface_hub tells
 *    storages apart;
 *  - one file: it is named `<base><ext>` and holds every entry in the given order, with no
 *    index; several: `<base>-00001-of-00003<ext>` ..., and `<base><ext>.index.json`.
 *
 * Nothing here knows a file format: the caller names the base and the extension
 * ("pytorch_model", ".bin"; "model", ".safetensors"). */
#ifndef CKPT_SHARD_H
#define CKPT_SHARD_H

#include "buf.h"

CKPT_BEGIN_DECL

/* ckpt_shard_entry.same_as of an entry with a storage of its own. */
#define CKPT_SHARD_OWN_STORAGE ((size_t)-1)

typedef struct ckpt_shard_entry {
    const char *name; /* the tensor's name in the output; copied */
    uint64_t nbytes;  /* bytes of its storage as written */
    size_t same_as;   /* an earlier entry with the same storage, or CKPT_SHARD_OWN_STORAGE */
} ckpt_shard_entry;

typedef struct ckpt_shard_file {
    const char *name;      /* "model-00001-of-00002.safetensors", with base's directory */
    const size_t *entries; /* indices into the entries given, in file order */
    size_t n_entries;
    uint64_t nbytes;       /* bytes of its storages, each counted once */
} ckpt_shard_file;

/* Read-only; made by ckpt_shard_plan_new, released by ckpt_shard_plan_free. */
typedef struct ckpt_shard_plan {
    const ckpt_shard_file *files; /* in order; none when there are no entries */
    size_t n_files;
    const char *index_name;       /* "<base><ext>.index.json" when n_files > 1, else NULL */
    uint64_t total_size;          /* the index's metadata.total_size: each storage once */
} ckpt_shard_plan;

/* Split n entries into files of at most max_size bytes (but for entries larger than that).
 * base may hold a directory ("mp_rank_01/pytorch_model"): the files and the index go
 * there, and the index names the files relative to itself. CKPT_EINVALID for an entry
 * without a name, two entries of one name, or a same_as that is not an earlier entry. */
CKPT_EXTERN(int) ckpt_shard_plan_new(ckpt_shard_plan **out, const ckpt_shard_entry *entries, size_t n,
                                     uint64_t max_size, const char *base, const char *ext);
/* NULL-safe. */
CKPT_EXTERN(void) ckpt_shard_plan_free(ckpt_shard_plan *p);

/* Append the index json as transformers and DeepSpeed write it, byte for byte
 * (Python's json.dumps(index, indent=2, sort_keys=True) + "\n"): metadata.total_size and
 * weight_map, every entry's name -> its file. Recent transformers also record
 * metadata.total_parameters (the elements of every tensor): given when non-zero; DeepSpeed
 * does not write it. CKPT_EINVALID for a name that is not UTF-8. */
CKPT_EXTERN(int) ckpt_shard_index_json(const ckpt_shard_plan *p, uint64_t total_parameters, ckpt_buf *out);

/* Append s as a JSON string the way Python's json.dumps writes it (ensure_ascii: printable
 * ASCII as it is, the short escapes, everything else as \uXXXX), for other index files that
 * must match Python's byte for byte. CKPT_EINVALID for a string that is not UTF-8. */
CKPT_EXTERN(int) ckpt_shard_json_string(ckpt_buf *out, const char *s);
/* Append v as Python's repr (and json.dumps) writes a float: the shortest digits that read
 * back, positional for exponents in [-4, 16), ".0" when whole. */
CKPT_EXTERN(int) ckpt_shard_json_float(ckpt_buf *out, double v);

CKPT_END_DECL

#endif
