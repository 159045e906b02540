/* attnlab's matrix products of a few rows, Y = act(X Wᵀ + b), shared out over the threads, and the
 * threads' barrier (common.h).
 *
 * Decoding one token multiplies every weight matrix by a single row (or a few: one per hypothesis
 * of a beam, a hundred for a batch of them), so the cost is reading the weights once. For so few
 * rows PyTorch's CPU product takes several times as long as reading the weights (docs/foundation.md
 * has the measurements). Here the outputs are split over the threads in contiguous ranges, and each
 * thread's range is computed by the register tiles of the instruction set chosen for the call
 * (panels.c, one build per ISA): each thread reads a single sequential stream of weights, which the
 * hardware prefetcher follows best.
 *
 * - packed_rows, packed_many: W packed once (attnlab_pack) for the layer kernels (layers.c), or,
 *   from some rows on, W as it is by the BLAS that PyTorch uses (its SGEMM, each thread computing
 *   its share of the outputs); attnlab_packed_rows is the same product on its own, for tests and
 *   measurements.
 */

#include "common.h"

#include <stdlib.h>

/* ---- the threads of one call ------------------------------------------------------------------ */

INTERNAL __thread team_t *team_now;
static __thread int team_seen; /* barriers this thread has completed in the call */

INTERNAL void team_enter(team_t *team) {
    team_now = team;
    team_seen = 0;
}

INTERNAL void team_sync(void) {
    const int threads = omp_get_num_threads();
    if (threads == 1) return;
    team_t *team = team_now;
    const int next = ++team_seen;
    if (atomic_fetch_add(&team->arrived, 1) == threads - 1) {
        atomic_store(&team->arrived, 0); /* before the phase: a thread released early finds it reset */
        atomic_store(&team->phase, next);
        return;
    }
    for (long spins = 0; atomic_load(&team->phase) != next; ++spins) {
        if (spins < 20000) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else
            sched_yield();
    }
}

/* ---- the instruction sets built here (kernels.py passes -DHAVE_ISA_<NAME> for each) ----------- */

static const isa_kernels_t *isa_kernels(int isa) {
    switch (isa) {
#if defined(HAVE_ISA_AVX512_BF16)
    case ISA_AVX512_BF16:
        return &attnlab_isa_avx512_bf16;
#endif
#if defined(HAVE_ISA_AVX512)
    case ISA_AVX512:
        return &attnlab_isa_avx512;
#endif
#if defined(HAVE_ISA_AVX2)
    case ISA_AVX2:
        return &attnlab_isa_avx2;
#endif
    default:
        return &attnlab_isa_generic;
    }
}

/* ---- W packed --------------------------------------------------------------------------------- */

INTERNAL unsigned *pairs_for(const products_t *products, long rows, long n) {
    if (products->weights != WEIGHTS_BF16_PAIRS) return 0;
    unsigned *pairs = malloc((size_t)(rows * ((n + 1) / 2)) * sizeof(unsigned));
    if (!pairs) __builtin_trap(); /* (a few rows of a layer: never near the memory's end) */
    return pairs;
}

/* X as the products of the call read it: itself, or (WEIGHTS_BF16_PAIRS) its rows converted once
 * for all the panels into the team's buffer, shared out over the threads; *ld its row stride. */
static const void *product_rows(const isa_kernels_t *k, const float *restrict X, long *ld, long rows, long n) {
    if (team_now->products->weights != WEIGHTS_BF16_PAIRS) return X;
    const long np = (n + 1) / 2;
    unsigned *XB = team_now->pairs;
    SHARE
    for (long m = 0; m < rows; ++m) k->to_pairs(X + m * *ld, n, XB + m * np);
    team_sync();
    *ld = np;
    return XB;
}

/* ---- the BLAS --------------------------------------------------------------------------------- */

/* SGEMM and MKL's GEMM_BF16BF16F32 of the Fortran interface (column-major, arguments by address),
 * as PyTorch's BLAS exports them; kernels.py passes the ones PyTorch loaded, after checking one
 * product of each against torch's. The integer arguments are given as 64-bit numbers: a BLAS with
 * 32-bit integers reads their first four bytes, which on these (little-endian) machines hold the
 * same value, and one with 64-bit integers reads them whole. */
typedef void (*sgemm_t)(const char *transa, const char *transb, const long *m, const long *n, const long *k,
                        const float *alpha, const float *a, const long *lda, const float *b, const long *ldb,
                        const float *beta, float *c, const long *ldc);
typedef void (*gemm_bf16_t)(const char *transa, const char *transb, const long *m, const long *n, const long *k,
                            const float *alpha, const unsigned short *a, const long *lda, const unsigned short *b,
                            const long *ldb, const float *beta, float *c, const long *ldc);

/* The BLAS routine for this call's weights (fp32: SGEMM; bf16 pairs: the bf16 product, which rounds
 * the rows to bf16 as the pairs' panels do), if a product of `rows` rows should take it: the packed
 * kernels stream each weight once per few rows, which is the cost of a product of one row or a few;
 * from some rows on the BLAS's blocking for the caches and registers wins, later for a large matrix
 * (a vocabulary projection), whose streaming the packed kernels do well (attnlab.accel.rules has the
 * lines and their measurements). NULL: the packed kernels. */
static const void *blas_for(const products_t *pr, const void *plain, long rows, long out, long n) {
    const void *routine = pr->weights == WEIGHTS_F32 ? pr->sgemm : pr->weights == WEIGHTS_BF16_PAIRS ? pr->gemm_bf16 : 0;
    if (!routine || !plain) return 0;
    const long least = out * n > pr->blas_large ? pr->blas_rows_large : pr->blas_rows;
    return least > 0 && rows >= least ? routine : 0;
}

/* This thread's share of `out` outputs: contiguous, in multiples of 16 (whole cache lines of Y). */
static void my_outputs(long out, long *o0, long *o1) {
    const int threads = omp_get_num_threads(), me = omp_get_thread_num();
    const long units = (out + 15) / 16;
    *o0 = units * me / threads * 16;
    *o1 = me == threads - 1 ? out : units * (me + 1) / threads * 16;
}

/* Outputs o0 … o1 − 1 of Y (rows, ldy) = act(X Wᵀ + b) by the BLAS routine, on this thread alone
 * (inside a parallel region MKL computes on the calling thread). W (out, n) row-major is, read
 * column-major, Wᵀ (n, out); so Yᵀ = W Xᵀ is GEMM("T", "N") with the roles written below. X: fp32
 * rows for SGEMM, bf16 rows (as product_rows wrote them, ldx bf16 numbers apart) for the bf16 one. */
static void blas_outputs(const products_t *pr, const void *routine, const void *W, const void *X, long ldx,
                         const float *restrict b, float *restrict Y, long ldy, long rows, long n, long o0, long o1,
                         int act) {
    if (o0 >= o1) return;
    const long m = o1 - o0, cols = rows, k = n, lda = n;
    const float one = 1.0f, zero = 0.0f;
    if (pr->weights == WEIGHTS_F32)
        ((sgemm_t)routine)("T", "N", &m, &cols, &k, &one, (const float *)W + o0 * n, &lda, X, &ldx, &zero, Y + o0,
                           &ldy);
    else
        ((gemm_bf16_t)routine)("T", "N", &m, &cols, &k, &one, (const unsigned short *)W + o0 * n, &lda, X, &ldx,
                               &zero, Y + o0, &ldy);
    /* the bias, then the activation: loops the compiler turns into vector code (but GELU's erff
     * and tanhf), a pass over the outputs that costs more than the product at a wide matrix if
     * left to the scalar activate() */
    for (long i = 0; i < rows; ++i) {
        float *restrict y = Y + i * ldy;
        if (b)
            for (long o = o0; o < o1; ++o) y[o] += b[o];
        if (act == ACT_RELU)
            for (long o = o0; o < o1; ++o) y[o] = y[o] > 0.0f ? y[o] : 0.0f;
        else if (act != ACT_NONE)
            for (long o = o0; o < o1; ++o) y[o] = activate(y[o], act);
    }
}

/* ---- W packed (or by the BLAS) --------------------------------------------------------------------- */

INTERNAL void packed_rows(weight_t W, const float *restrict X, long ldx, const float *restrict b, float *restrict Y,
                          long ldy, long rows, long out, long n, int act) {
    const products_t *pr = team_now->products;
    const isa_kernels_t *k = isa_kernels(pr->isa);
    const void *blas = blas_for(pr, W.plain, rows, out, n);
    const void *rows_in = product_rows(k, X, &ldx, rows, n);
    if (blas) {
        long o0, o1;
        my_outputs(out, &o0, &o1);
        blas_outputs(pr, blas, W.plain, rows_in, pr->weights == WEIGHTS_F32 ? ldx : 2 * ldx, b, Y, ldy, rows, n, o0,
                     o1, act);
        team_sync();
        return;
    }
    const long panels = (out + PANEL - 1) / PANEL;
    const int threads = omp_get_num_threads(), me = omp_get_thread_num();
    /* contiguous ranges of panels, in the groups that a single row takes at once */
    const long unit = rows == 1 ? k->one_row_panels : 1, units = (panels + unit - 1) / unit;
    const long u0 = units * me / threads, u1 = units * (me + 1) / threads;
    const long p0 = u0 * unit, p1 = u1 * unit < panels ? u1 * unit : panels;
    if (p0 < p1) k->packed(W.packed, pr->weights, rows_in, ldx, b, Y, ldy, rows, out, n, p0, p1, act);
    team_sync();
}

INTERNAL void packed_many(const weight_t *W, const float *const *b, const float *restrict X, long ldx,
                          float *restrict Y, long rows, long count, long out, long n) {
    const products_t *pr = team_now->products;
    const isa_kernels_t *k = isa_kernels(pr->isa);
    const void *blas = blas_for(pr, W[0].plain, rows, out, n);
    for (long m = 1; m < count; ++m) blas = blas_for(pr, W[m].plain, rows, out, n) ? blas : 0;
    const void *rows_in = product_rows(k, X, &ldx, rows, n);
    if (blas) {
        /* this thread's share of the count · out outputs side by side, cut at the matrices' edges */
        long c0, c1;
        my_outputs(count * out, &c0, &c1);
        for (long m = c0 / out; m < count && m * out < c1; ++m) {
            const long lo = c0 > m * out ? c0 - m * out : 0, hi = c1 < (m + 1) * out ? c1 - m * out : out;
            blas_outputs(pr, blas, W[m].plain, rows_in, pr->weights == WEIGHTS_F32 ? ldx : 2 * ldx, b ? b[m] : 0,
                         Y + m * out, count * out, rows, n, lo, hi, ACT_NONE);
        }
        team_sync();
        return;
    }
    const long panels = (out + PANEL - 1) / PANEL;
    SHARE
    for (long j = 0; j < count * panels; ++j) {
        const long m = j / panels, p = j - m * panels;
        k->packed(W[m].packed, pr->weights, rows_in, ldx, b ? b[m] : 0, Y + m * out, count * out, rows, out, n, p,
                  p + 1, ACT_NONE);
    }
    team_sync();
}

/* W (out, n) row-major → its packed form: panels of PANEL outputs, zeros past `out` (see panels.c).
 * WEIGHTS_F32 and WEIGHTS_BF16: panel p holds W[16p + j][k] at (p n + k) 16 + j (4 or 2 bytes
 * each). WEIGHTS_BF16_PAIRS: at ((p ⌈n/2⌉ + k/2) 16 + j) 2 + k mod 2, a zero for k = n of an odd n. */
void attnlab_pack(const void *restrict W, void *restrict Wp, long out, long n, int weights) {
    const long size = weights == WEIGHTS_F32 ? 4 : 2, panels = (out + PANEL - 1) / PANEL;
    const char *w = W;
    char *wp = Wp;
    if (weights == WEIGHTS_BF16_PAIRS) {
        const long np = (n + 1) / 2;
        for (long p = 0; p < panels; ++p)
            for (long k = 0; k < 2 * np; ++k)
                for (long j = 0; j < PANEL; ++j) {
                    const long o = p * PANEL + j;
                    char *to = wp + (((p * np + k / 2) * PANEL + j) * 2 + k % 2) * size;
                    if (o < out && k < n) memcpy(to, w + (o * n + k) * size, size);
                    else memset(to, 0, size);
                }
        return;
    }
    for (long p = 0; p < panels; ++p)
        for (long k = 0; k < n; ++k)
            for (long j = 0; j < PANEL; ++j) {
                const long o = p * PANEL + j;
                char *to = wp + ((p * n + k) * PANEL + j) * size;
                if (o < out) memcpy(to, w + (o * n + k) * size, size);
                else memset(to, 0, size);
            }
}

/* Y (rows, out) = X Wᵀ + b with W packed (or by the BLAS): the product of the layer kernels, on its own. */
void attnlab_packed_rows(const weight_t *W, const float *restrict X, const float *restrict b, float *restrict Y,
                         long rows, long out, long n, const products_t *products) {
    team_t team = {.products = products, .pairs = pairs_for(products, rows, n)};
#pragma omp parallel num_threads(products->threads)
    {
        team_enter(&team);
        packed_rows(*W, X, n, b, Y, out, rows, out, n, ACT_NONE);
    }
    free(team.pairs);
}

/* out: the places of layout.py's structures as this compiler lays them out (LAYOUT_PLACES). */
void attnlab_layout(long *out) {
    static const long places[] = LAYOUT_PLACES;
    memcpy(out, places, sizeof places);
}
