/* One line per format. Cheap bidders first; a new format is one file plus one line here.
 * The names users type for a format live here too, beside the format they name, so that
 * no command line keeps a table of its own. */
#include <ckpt/sys/registry.h>

#include <string.h>

extern const ckpt_format_vtable ckpt_format_safetensors;
extern const ckpt_format_vtable ckpt_format_torch;
extern const ckpt_format_vtable ckpt_format_pdparams;
extern const ckpt_format_vtable ckpt_format_deepspeed_zero;
extern const ckpt_format_vtable ckpt_format_torch_dcp;
#ifdef CKPT_HAVE_HDF5
extern const ckpt_format_vtable ckpt_format_hdf5;
#endif

static const struct registry_entry {
    const ckpt_format_vtable *format;
    const char *aliases; /* space separated; besides the name and the extensions */
} formats[] = {
    { &ckpt_format_safetensors, "st" },
    { &ckpt_format_torch, "pytorch" },
    { &ckpt_format_pdparams, "paddle" },
    { &ckpt_format_deepspeed_zero, "deepspeed" },
    { &ckpt_format_torch_dcp, "dcp torch_dist distcp" },
#ifdef CKPT_HAVE_HDF5
    { &ckpt_format_hdf5, "h5 hdf" },
#endif
};

size_t ckpt_registry__count(void)
{
    return sizeof formats / sizeof formats[0];
}

const ckpt_format_vtable *ckpt_registry__at(size_t i)
{
    return i < ckpt_registry__count() ? formats[i].format : NULL;
}

const ckpt_format_vtable *ckpt_registry__find(const char *name)
{
    size_t i;
    for (i = 0; i < ckpt_registry__count(); i++)
        if (strcmp(formats[i].format->name, name) == 0)
            return formats[i].format;
    return NULL;
}

/* Whether the space-separated list holds word; with skip_dot, an item's leading dot is
 * not part of it (extensions are listed as ".pt", users also write "pt"). */
static int list_has(const char *list, const char *word, int skip_dot)
{
    size_t len = strlen(word);

    while (list && *list) {
        size_t n = strcspn(list, " "), dot = skip_dot && *list == '.';
        if (n - dot == len && strncmp(list + dot, word, len) == 0)
            return 1;
        list += n;
        list += strspn(list, " ");
    }
    return 0;
}

const ckpt_format_vtable *ckpt_registry__lookup(const char *name)
{
    const ckpt_format_vtable *f;
    const char *bare;
    size_t i;

    if (!name || !*name)
        return NULL;
    /* Names, then aliases, then extensions: a format's own name always means that format. */
    if ((f = ckpt_registry__find(name)))
        return f;
    for (i = 0; i < ckpt_registry__count(); i++)
        if (list_has(formats[i].aliases, name, 0))
            return formats[i].format;
    bare = name[0] == '.' ? name + 1 : name;
    for (i = 0; *bare && i < ckpt_registry__count(); i++)
        if (list_has(formats[i].format->extensions, bare, 1))
            return formats[i].format;
    return NULL;
}

const char *ckpt_format_find(const char *name_alias_or_ext)
{
    const ckpt_format_vtable *f = ckpt_registry__lookup(name_alias_or_ext);
    return f ? f->name : NULL;
}
