/* Shared declaration macros for the public ckptconv API. */
#ifndef CKPT_COMMON_H
#define CKPT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && defined(CKPT_SHARED)
#  ifdef CKPT_BUILD
#    define CKPT_EXTERN(type) __declspec(dllexport) type
#  else
#    define CKPT_EXTERN(type) __declspec(dllimport) type
#  endif
#elif defined(__GNUC__)
#  define CKPT_EXTERN(type) extern __attribute__((visibility("default"))) type
#else
#  define CKPT_EXTERN(type) extern type
#endif

#ifdef __cplusplus
#  define CKPT_BEGIN_DECL extern "C" {
#  define CKPT_END_DECL }
#else
#  define CKPT_BEGIN_DECL
#  define CKPT_END_DECL
#endif

#if defined(__GNUC__)
#  define CKPT_FORMAT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#  define CKPT_FORMAT_PRINTF(a, b)
#endif

#define CKPT_VERSION_MAJOR 0
#define CKPT_VERSION_MINOR 1
#define CKPT_VERSION_PATCH 0
#define CKPT_VERSION_STRING "0.1.0"

/* Most dimensions a tensor may have; torch allows more, no checkpoint uses them. */
#define CKPT_MAX_DIMS 16

#endif
