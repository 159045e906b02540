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
 * - attnlab_linear_rows, attnlab_linear_many: W as it is (attnlab.accel.linear and stacked_linear).
 * - packed_rows, packed_many: W packed once (attnlab_pack) for the layer kernels (layers.c);
 *   attnlab_packed_rows is the same product on its own, for tests and measurements.
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

/* ---- W as it is ----------------------------------------------------------------------------- */

/* Outputs per unit of parallel work: a multiple of the tile widths (3 and 4; 8 for one row). */
#define BLOCK 12
#define BLOCK_ONE_ROW 16

/* Y (rows, ldy) = X Wᵀ + b for W (out, n), inside a parallel region: the output blocks are shared
 * out over the threads. */
static void linear_rows(const isa_kernels_t *k, const float *restrict W, const float *restrict X, long ldx,
                        const float *restrict b, float *restrict Y, long ldy, long rows, long out, long n) {
    const long size = rows == 1 ? BLOCK_ONE_ROW : BLOCK, blocks = (out + size - 1) / size;
#pragma omp for schedule(static)
    for (long j = 0; j < blocks; ++j) {
        const long o0 = j * size, o1 = o0 + size < out ? o0 + size : out;
        k->block(W, X, ldx, b, Y, ldy, rows, n, o0, o1, ACT_NONE);
    }
}

/* Y = X Wᵀ + b. Shapes: W (out, n) row-major and contiguous, X (rows, n) contiguous, b (out,) or
 * NULL, Y (rows, out). */
void attnlab_linear_rows(const float *restrict W, const float *restrict X, const float *restrict b, float *restrict Y,
                         long rows, long out, long n, int isa, int threads) {
    const isa_kernels_t *k = isa_kernels(isa);
#pragma omp parallel num_threads(threads)
    linear_rows(k, W, X, n, b, Y, out, rows, out, n);
}

/* `count` matrices of one shape times the same rows, their outputs side by side: the query, key
 * and value projections of a decoding step in one parallel region instead of three (each region
 * costs a fork and a barrier, comparable to streaming a small matrix). The numbers of
 * attnlab_linear_rows.
 *
 * Shapes: W[m] (out, n) row-major and contiguous for m < count, X (rows, n) contiguous, b NULL or
 * b[m] (out,), Y (rows, count * out) with Y[i][m * out + o] = W[m][o] . X[i] + b[m][o]. */
void attnlab_linear_many(const float *const *W, const float *restrict X, const float *const *b, float *restrict Y,
                         long rows, long count, long out, long n, int isa, int threads) {
    const isa_kernels_t *k = isa_kernels(isa);
    const long size = rows == 1 ? BLOCK_ONE_ROW : BLOCK, blocks = (out + size - 1) / size;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long j = 0; j < count * blocks; ++j) {
        const long m = j / blocks, o0 = (j - m * blocks) * size, o1 = o0 + size < out ? o0 + size : out;
        k->block(W[m], X, n, b ? b[m] : 0, Y + m * out, count * out, rows, n, o0, o1, ACT_NONE);
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

INTERNAL void packed_rows(const void *restrict Wp, const float *restrict X, long ldx, const float *restrict b,
                          float *restrict Y, long ldy, long rows, long out, long n, int act) {
    const products_t *pr = team_now->products;
    const isa_kernels_t *k = isa_kernels(pr->isa);
    const void *rows_in = product_rows(k, X, &ldx, rows, n);
    const long panels = (out + PANEL - 1) / PANEL;
    const int threads = omp_get_num_threads(), me = omp_get_thread_num();
    /* contiguous ranges of panels, in the groups that a single row takes at once */
    const long unit = rows == 1 ? k->one_row_panels : 1, units = (panels + unit - 1) / unit;
    const long u0 = units * me / threads, u1 = units * (me + 1) / threads;
    const long p0 = u0 * unit, p1 = u1 * unit < panels ? u1 * unit : panels;
    if (p0 < p1) k->packed(Wp, pr->weights, rows_in, ldx, b, Y, ldy, rows, out, n, p0, p1, act);
    team_sync();
}

INTERNAL void packed_many(const void *const *Wp, const float *const *b, const float *restrict X, long ldx,
                          float *restrict Y, long rows, long count, long out, long n) {
    const products_t *pr = team_now->products;
    const isa_kernels_t *k = isa_kernels(pr->isa);
    const void *rows_in = product_rows(k, X, &ldx, rows, n);
    const long panels = (out + PANEL - 1) / PANEL;
    SHARE
    for (long j = 0; j < count * panels; ++j) {
        const long m = j / panels, p = j - m * panels;
        k->packed(Wp[m], pr->weights, rows_in, ldx, b ? b[m] : 0, Y + m * out, count * out, rows, out, n, p, p + 1,
                  ACT_NONE);
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

/* Y (rows, out) = X Wᵀ + b with W packed: the product of the layer kernels, on its own. */
void attnlab_packed_rows(const void *restrict Wp, const float *restrict X, const float *restrict b, float *restrict Y,
                         long rows, long out, long n, const products_t *products) {
    team_t team = {.products = products, .pairs = pairs_for(products, rows, n)};
#pragma omp parallel num_threads(products->threads)
    {
        team_enter(&team);
        packed_rows(Wp, X, n, b, Y, out, rows, out, n, ACT_NONE);
    }
    free(team.pairs);
}

/* out: the places of layout.py's structures as this compiler lays them out (LAYOUT_PLACES). */
void attnlab_layout(long *out) {
    static const long places[] = LAYOUT_PLACES;
    memcpy(out, places, sizeof places);
}
