#include <ckpt.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    ckpt_ckpt *c;
    if (argc < 2 || ckpt_open(&c, argv[1], NULL) < 0) {
        fprintf(stderr, "%s\n", ckpt_error_last()->message);
        return 1;
    }
    printf("%s %zu\n", ckpt_format_name(c), ckpt_tensor_count(c));
    ckpt_close(c);
    return 0;
}
