/* Zip record signatures and fixed sizes (PKWARE APPNOTE 4.3), shared by the reader and
 * the writer. */
#ifndef CKPT_IO_ZIP_PRIVATE_H
#define CKPT_IO_ZIP_PRIVATE_H

#ifndef CKPT_BUILD
#error "zip_private.h is internal to libckpt"
#endif

#define CKPT_ZIP_LOCAL_SIG 0x04034b50u      /* "PK\3\4" */
#define CKPT_ZIP_CENTRAL_SIG 0x02014b50u    /* "PK\1\2" */
#define CKPT_ZIP_DESCRIPTOR_SIG 0x08074b50u /* "PK\7\8" */
#define CKPT_ZIP_EOCD_SIG 0x06054b50u       /* "PK\5\6" */
#define CKPT_ZIP64_EOCD_SIG 0x06064b50u     /* "PK\6\6" */
#define CKPT_ZIP64_LOCATOR_SIG 0x07064b50u  /* "PK\6\7" */

#define CKPT_ZIP_LOCAL_SIZE 30
#define CKPT_ZIP_CENTRAL_SIZE 46
#define CKPT_ZIP_EOCD_SIZE 22
#define CKPT_ZIP64_EOCD_SIZE 56
#define CKPT_ZIP64_LOCATOR_SIZE 20
#define CKPT_ZIP_MAX_COMMENT 0xFFFFu

#define CKPT_ZIP64_EXTRA_ID 0x0001u
/* A 32-bit size or offset field holding this value is in the zip64 extra field instead;
 * 16-bit counts use 0xFFFF likewise. */
#define CKPT_ZIP_U32_MARK 0xFFFFFFFFu
#define CKPT_ZIP_U16_MARK 0xFFFFu

#define CKPT_ZIP_FLAG_ENCRYPTED 0x0001u
#define CKPT_ZIP_FLAG_STRONG_ENCRYPTION 0x0040u
#define CKPT_ZIP_FLAG_DESCRIPTOR 0x0008u
#define CKPT_ZIP_FLAG_UTF8 0x0800u

#endif
