// The public headers must be usable from C++.
#include <ckpt.h>
#include <ckpt/sys/backend.h>
#include <ckpt/sys/format.h>
#include <ckpt/sys/model.h>
#include <ckpt/sys/pickle.h>
#include <ckpt/sys/zip.h>

int ckpt_headertest_cxx();
int ckpt_headertest_cxx()
{
    return ckpt_error_last() != nullptr;
}
