/* The public headers must stand alone under -pedantic. */
#include <ckpt.h>
#include <ckpt/sys/backend.h>
#include <ckpt/sys/format.h>
#include <ckpt/sys/model.h>
#include <ckpt/sys/pickle.h>
#include <ckpt/sys/zip.h>

int ckpt_headertest(void);
int ckpt_headertest(void)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    return (int)o.version;
}
