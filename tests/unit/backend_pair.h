/* Two compute backends side by side for tests/unit/test_backend_cuda.c: seeded data, running
 * one operation on both, and checking the results against tolerances (backend_pair.c). */
#ifndef CKPT_TEST_BACKEND_PAIR_H
#define CKPT_TEST_BACKEND_PAIR_H

#include <ckpt.h>
#include <ckpt/sys/backend.h>

#include <stdint.h>

extern const double U32; /* 2^-24, float32 unit roundoff */

typedef struct side {
    const char *name;
    ckpt_backend *b;
    const ckpt_backend_vtable *vt;
    void *ctx;
} side;

extern side cuda, cpu;

/* Per operation: cases run, cases failed, and the worst error as a fraction of its tolerance. */
typedef struct op_stats {
    const char *name;
    int cases, failed;
    double worst_abs, worst_l2;
    char worst_abs_case[160], worst_l2_case[160];
} op_stats;

enum { OP_LINEAR, OP_ATTENTION, OP_NORM, OP_ROPE, OP_ACT, OP_ADD, OP_COMPARE, OP_ERRORS, OP_COUNT };
extern op_stats stats[];

/* The operation itself, given the device copies of the case's arrays. */
typedef int (*call_fn)(side *s, void *const *dev, void *arg);

void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rng_seed(uint64_t seed);
double rng_unit(void); /* [0, 1) */
void fill_uniform(float *x, int64_t n, double lo, double hi);
/* Multiples of 1/64 in [-limit, limit] (limit <= 2): exact in bfloat16 and float16. */
void fill_exact(float *x, int64_t n, double limit);
/* Host buffers of the current case, freed together by case_done. */
void *case_alloc(size_t bytes);
float *floats(int64_t n);
double *doubles(int64_t n);
void case_done(void);
/* Run one operation on one side (0, or -1 after reporting what failed); on both. */
int run_op(side *s, int op, const char *desc, int n, const void *const *in, const size_t *bytes, int out_index, void *out, call_fn call, void *arg);
int run_both(int op, const char *desc, int n, const void *const *in, const size_t *bytes, int out_index, void *ref, void *got, call_fn call, void *arg);
/* Index i of a row-major array, in words; got against ref within tolerances. */
void where(char *buf, size_t cap, int64_t i, const int64_t *dims, const char *const *names, int nd);
void check(int op, const char *desc, const float *ref, const float *got, int64_t n, const double *tol, double l2_tol, const int64_t *dims, const char *const *names, int nd);
double gamma_n(int64_t n);
double norm2(const float *x, int64_t n);
double unit_of(ckpt_dtype t);

#endif
