/* Outputs are checked against the inputs held open: the same file (by a symbolic or a hard
 * link too), the same directory, anything inside an input directory, however deep and
 * whether it exists yet or not. */
#include "test.h"

#define CKPT_BUILD
#include "io/inputs.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int owner_a, owner_b;

#define ASSERT_REFUSED(call, words)                                                     \
    do {                                                                                \
        ASSERT_FAILS(CKPT_EINVALID, call);                                              \
        ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);                \
        ASSERT_TRUE(strstr(ckpt_error_last()->message, words) != NULL);                 \
    } while (0)

CKPT_TEST(test_inputs_file_and_its_links)
{
    ckpt_test_write_file("in.pt", "x", 1);
    ckpt_test_write_file("other.pt", "y", 1);
    ASSERT_TRUE(link("in.pt", "hard.pt") == 0 && symlink("in.pt", "sym.pt") == 0 && symlink("hard.pt", "sym2.pt") == 0);
    ASSERT_OK(ckpt_inputs__hold(&owner_a, "in.pt"));
    ASSERT_REFUSED(ckpt_inputs__check_output("in.pt"), "in.pt is the input in.pt");
    ASSERT_REFUSED(ckpt_inputs__check_output("./in.pt"), "is the input in.pt");
    ASSERT_REFUSED(ckpt_inputs__check_output("hard.pt"), "hard.pt is the input in.pt");
    ASSERT_REFUSED(ckpt_inputs__check_output("sym.pt"), "sym.pt is the input in.pt");
    ASSERT_REFUSED(ckpt_inputs__check_output("sym2.pt"), "sym2.pt is the input in.pt");
    /* beside the input is fine: it is a file, not a directory */
    ASSERT_OK(ckpt_inputs__check_output("other.pt"));
    ASSERT_OK(ckpt_inputs__check_output("new.pt"));
    ckpt_inputs__release(&owner_a);
    ASSERT_OK(ckpt_inputs__check_output("in.pt"));
}

CKPT_TEST(test_inputs_directory)
{
    ASSERT_TRUE(mkdir("in", 0777) == 0 && mkdir("in/sub", 0777) == 0 && mkdir("in2", 0777) == 0);
    ASSERT_TRUE(symlink("in", "link") == 0);
    ASSERT_OK(ckpt_inputs__hold(&owner_a, "in"));
    ASSERT_REFUSED(ckpt_inputs__check_output("in"), "in and in are the same directory");
    ASSERT_REFUSED(ckpt_inputs__check_output("link/"), "in and link/ are the same directory");
    ASSERT_REFUSED(ckpt_inputs__check_output("in/o.safetensors"), "in/o.safetensors is inside the input directory in");
    ASSERT_REFUSED(ckpt_inputs__check_output("in/sub/a/b/c"), "inside the input directory in");
    ASSERT_REFUSED(ckpt_inputs__check_output("link/new"), "link/new is inside the input directory in");
    ASSERT_REFUSED(ckpt_inputs__check_output("in2/../in/x"), "inside the input directory in");
    ASSERT_OK(ckpt_inputs__check_output("in2/x"));
    ASSERT_OK(ckpt_inputs__check_output("in2"));
    ASSERT_OK(ckpt_inputs__check_output("new/deeper/x"));
    ASSERT_OK(ckpt_inputs__check_output("."));
    ckpt_inputs__release(&owner_a);
    ASSERT_OK(ckpt_inputs__check_output("in/x"));
}

/* An input of two owners stays held until both let go; releasing one owner leaves the
 * other's; a path that does not exist holds nothing. */
CKPT_TEST(test_inputs_owners)
{
    ckpt_test_write_file("a.pt", "x", 1);
    ckpt_test_write_file("b.pt", "x", 1);
    ASSERT_OK(ckpt_inputs__hold(&owner_a, "a.pt"));
    ASSERT_OK(ckpt_inputs__hold(&owner_b, "a.pt"));
    ASSERT_OK(ckpt_inputs__hold(&owner_b, "b.pt"));
    ASSERT_OK(ckpt_inputs__hold(&owner_b, "missing.pt"));
    ckpt_inputs__release(&owner_b);
    ASSERT_REFUSED(ckpt_inputs__check_output("a.pt"), "a.pt is the input a.pt");
    ASSERT_OK(ckpt_inputs__check_output("b.pt"));
    ASSERT_OK(ckpt_inputs__check_output("missing.pt"));
    ckpt_inputs__release(&owner_a);
    ASSERT_OK(ckpt_inputs__check_output("a.pt"));
}

CKPT_TEST(test_inputs_check_apart)
{
    ASSERT_TRUE(mkdir("in", 0777) == 0);
    ASSERT_REFUSED(ckpt_inputs__check_apart("in/x", "in"), "in/x is inside the input directory in");
    ASSERT_REFUSED(ckpt_inputs__check_apart("in", "./in/"), "are the same directory");
    ASSERT_OK(ckpt_inputs__check_apart("x", "in"));
    ASSERT_OK(ckpt_inputs__check_apart("in/x", "missing"));
}

/* What readers open is held while they are open: a conversion onto its own input, by any
 * name, is refused before anything is written, and the input is left as it was. */
CKPT_TEST(test_inputs_held_by_readers)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    size_t before_len, after_len;
    unsigned char *before, *after;
    ckpt_ckpt *c;

    before = ckpt_test_read_file(ckpt_test_data("sample/tiny_llama.pt"), &before_len);
    ASSERT_TRUE(before != NULL);
    ckpt_test_write_file("x.pt", before, before_len);
    ASSERT_TRUE(link("x.pt", "hard.pt") == 0);
    o.overwrite = 1;
    ASSERT_OK(ckpt_open(&c, "x.pt", NULL));
    ASSERT_REFUSED(ckpt_convert(c, "x.pt", &o, NULL), "x.pt is the input x.pt");
    ASSERT_REFUSED(ckpt_convert(c, "hard.pt", &o, NULL), "hard.pt is the input x.pt");
    ckpt_close(c);
    after = ckpt_test_read_file("x.pt", &after_len);
    ASSERT_TRUE(after && after_len == before_len && memcmp(before, after, before_len) == 0);
    free(before);
    free(after);
    /* closed: nothing is held any more */
    ASSERT_OK(ckpt_inputs__check_output("x.pt"));
}
