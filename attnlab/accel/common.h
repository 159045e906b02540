/* What attnlab's kernels share: the generated layout (layout.h, from attnlab/accel/layout.py), the
 * eight-float vectors of the code built for the machine, the activations, the threads of one call
 * (team_t and its barrier), and the products that every layer kernel calls (products.c), whose
 * register tiles are built once per instruction set (panels.c).
 *
 * Every file is built with -ffp-contract=off: a · b + c is rounded once only where the code writes
 * an FMA, so a number comes out the same whichever loop computed it.
 */

#pragma once

#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "layout.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

/* Symbols shared between the files of the library but not exported from it. */
#define INTERNAL __attribute__((visibility("hidden")))

/* ---- eight floats, in whatever vector registers the target has (GCC/Clang vector extensions) ---- */

typedef float f32x8 __attribute__((vector_size(32)));
typedef int i32x8 __attribute__((vector_size(32)));

static inline f32x8 load8(const float *p) {
    f32x8 v;
    memcpy(&v, p, sizeof v); /* an unaligned load */
    return v;
}

static inline f32x8 splat8(float v) {
    return (f32x8){v, v, v, v, v, v, v, v};
}

/* a · b + c rounded once, written out rather than left to the compiler's contraction (off). */
#if defined(__FMA__)
static inline f32x8 fma8(f32x8 a, f32x8 b, f32x8 c) {
    return (f32x8)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
}
#else
static inline f32x8 fma8(f32x8 a, f32x8 b, f32x8 c) {
    f32x8 r;
    for (int i = 0; i < 8; ++i) r[i] = fmaf(a[i], b[i], c[i]);
    return r;
}
#endif

/* The lanes' sum in a fixed order. */
static inline float hsum8(f32x8 a) {
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

/* y through the feed-forward's activation (the codes of layout.py's ACTIVATIONS). */
static inline float activate(float y, int act) {
    if (act == ACT_RELU) return y > 0.0f ? y : 0.0f;
    if (act == ACT_GELU) return 0.5f * y * (1.0f + erff(y * 0.70710678118654752f)); /* exact GELU, x Φ(x) */
    if (act == ACT_GELU_TANH) /* GELU's tanh approximation (Hendrycks & Gimpel 2016), GPT-2's */
        return 0.5f * y * (1.0f + tanhf(0.79788456080286536f * (y + 0.044715f * y * y * y)));
    return y;
}

/* ---- the threads of one kernel call ----------------------------------------------------------------
 *
 * A decoding step is a few dozen work-sharing loops, each ending in a barrier. OpenMP's own barrier
 * sleeps at once under OMP_WAIT_POLICY=PASSIVE (the attnlab command's default outside training,
 * attnlab/openmp.py) and a sleeping thread takes tens of microseconds to wake: a step of a few rows
 * became several times slower. So the loops inside one call end in team_sync instead, which spins
 * for a short while (a loop of the step takes microseconds) and then gives the core away
 * (sched_yield), so that on a busy machine a thread whose partner was descheduled does not burn its
 * time waiting. Each thread of a call's parallel region calls team_enter first. */

typedef struct {
    atomic_int arrived;          /* threads at the current barrier */
    atomic_int phase;            /* barriers completed */
    const products_t *products;  /* how the call's packed weights store their numbers, which ISA */
    unsigned *pairs;             /* WEIGHTS_BF16_PAIRS: room for a product's rows in bf16 pairs */
} team_t;

/* The rows in bf16 pairs that the widest product of a call needs (rows · ⌈n/2⌉ for its largest n),
 * allocated for a team when its weights are WEIGHTS_BF16_PAIRS (else NULL); free() after the call. */
INTERNAL unsigned *pairs_for(const products_t *products, long rows, long n);

INTERNAL extern __thread team_t *team_now; /* the call this thread works for */

INTERNAL void team_enter(team_t *team);
INTERNAL void team_sync(void);

/* A loop shared out over the threads without OpenMP's barrier; team_sync() after it. */
#define SHARE _Pragma("omp for schedule(static) nowait")

/* ---- the products (products.c), inside a parallel region ---------------------------------------- */

/* Y (rows, ldy) = act(X Wᵀ + b) for a W of `out` outputs and n inputs (the packed panels shared out
 * over the threads, or from some rows on each thread's share of the outputs by the BLAS; then
 * team_sync). */
INTERNAL void packed_rows(weight_t W, const float *restrict X, long ldx, const float *restrict b, float *restrict Y,
                          long ldy, long rows, long out, long n, int act);

/* `count` matrices of one shape times the same rows, outputs side by side (rows, count·out). */
INTERNAL void packed_many(const weight_t *W, const float *const *b, const float *restrict X, long ldx,
                          float *restrict Y, long rows, long count, long out, long n);

/* ---- one instruction set's register tiles (panels.c, built once per ISA) ------------------------- */

typedef struct {
    /* Panels p0 … p1 − 1 of Y (rows, ldy) = act(X Wᵀ + b), W packed (`weights`: WEIGHTS_*). For
     * WEIGHTS_BF16_PAIRS, X holds the rows as to_pairs wrote them (ldx: pairs per row). */
    void (*packed)(const void *restrict Wp, int weights, const void *restrict X, long ldx,
                   const float *restrict b, float *restrict Y, long ldy, long rows, long out, long n, long p0,
                   long p1, int act);
    /* A row of n floats as ⌈n/2⌉ pairs of bf16 numbers (NULL but in the BF16 variant). */
    void (*to_pairs)(const float *restrict x, long n, unsigned *restrict xb);
    long one_row_panels; /* panels a single row takes at once (packed), so the threads share them out so */
} isa_kernels_t;

INTERNAL extern const isa_kernels_t attnlab_isa_generic, attnlab_isa_avx2, attnlab_isa_avx512,
    attnlab_isa_avx512_bf16;
