/* attnlab's native kernels for decoding one token at a time, fp32.
 *
 * Generating one token multiplies every weight matrix by a single vector (or a few: one per beam),
 * so the cost is reading the weights from memory once. The loop is the plainest one: the weight
 * rows are split over the threads in contiguous ranges, and each is one vectorised dot product
 * per input row. Each thread then reads a single sequential stream, which the hardware prefetcher follows best (a variant that
 * interleaves four rows was slower; docs/foundation.md has the measurements). Built by
 * attnlab/accel/kernels.py with -O3 -march=native.
 */

#include <math.h>
#include <omp.h>
#include <string.h>

/* Eight floats, in whatever vector registers the target has (GCC/Clang vector extensions). */
typedef float f32x8 __attribute__((vector_size(32)));

static inline f32x8 load8(const float *p) {
    f32x8 v;
    memcpy(&v, p, sizeof v); /* an unaligned load */
    return v;
}

/* a · b + c rounded once. Written out rather than left to the compiler's contraction of a · b + c
 * (built with -ffp-contract=off), which it applies in some loops and not others: a number must
 * come out the same whichever loop computed it. */
#if defined(__FMA__)
#include <immintrin.h>
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

/* w . x over n floats. Four independent accumulators: a single one makes every multiply-add wait
 * for the previous one, and a row of a few hundred floats is then bound by that latency rather
 * than by memory. The order of the additions is fixed by the code, the same for every caller. */
static inline float row_dot(const float *restrict w, const float *restrict x, long n) {
    f32x8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    long i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = fma8(load8(w + i), load8(x + i), a0);
        a1 = fma8(load8(w + i + 8), load8(x + i + 8), a1);
        a2 = fma8(load8(w + i + 16), load8(x + i + 16), a2);
        a3 = fma8(load8(w + i + 24), load8(x + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = fma8(load8(w + i), load8(x + i), a0);
    const f32x8 a = (a0 + a1) + (a2 + a3);
    float acc = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    for (; i < n; ++i) acc = fmaf(w[i], x[i], acc);
    return acc;
}

/* out = softmax(scale * k q) v over the n rows of k and v (each Dh floats, consecutive), in one
 * pass with the online softmax (Milakov & Gimelshein 2018): the weighted sum is kept relative to
 * the largest score seen so far and rescaled when a larger one appears, so no exponential
 * overflows and the scores need no buffer. n = 0 gives zeros. */
static inline void attend_row(const float *restrict qi, const float *restrict k, const float *restrict v, long n,
                              long Dh, float scale, float *restrict o) {
    float top = -INFINITY, total = 0.0f;
    for (long d = 0; d < Dh; ++d) o[d] = 0.0f;
    for (long j = 0; j < n; ++j) {
        const float score = scale * row_dot(k + j * Dh, qi, Dh);
        if (score > top) { /* a new maximum: what was summed so far shrinks (exp(-inf) = 0 at first) */
            const float shrink = expf(top - score);
            total *= shrink;
            for (long d = 0; d < Dh; ++d) o[d] *= shrink;
            top = score;
        }
        const float p = expf(score - top);
        const float *vj = v + j * Dh;
        total += p;
#pragma omp simd
        for (long d = 0; d < Dh; ++d) o[d] += p * vj[d];
    }
    if (n > 0) {
        const float inv = 1.0f / total;
        for (long d = 0; d < Dh; ++d) o[d] *= inv;
    }
}

/* ---- products of a few rows ------------------------------------------------------------------
 *
 * Y = X Wᵀ + b for one row of X (a decoding step), a few (beam search over one sentence) or a
 * hundred (beam search over a batch). For so few rows PyTorch's CPU product takes several times
 * as long as reading the weights (docs/foundation.md has the measurements). The work is cut into
 * tiles of MR rows × NR outputs held in registers: each weight vector loaded feeds MR rows and each
 * row vector NR outputs, so the weights stream from memory once whatever the number of rows, and
 * at many rows the loop does several multiply-adds per load (a lone dot product does one per two).
 *
 * Every number is one accumulator of eight lanes over the chunks of eight in order, then the
 * fixed sum of the lanes, then the scalar tail: the same additions in the same order whatever the
 * tile, so a row gives the same bits alone or beside others (tested). */

static inline float hsum8(f32x8 a) {
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

#define DEFINE_TILE(MR, NR)                                                                               \
    static void tile_##MR##_##NR(const float *restrict W, const float *restrict X, long n, long ldx,     \
                                 float *restrict out) {                                                   \
        f32x8 acc[MR][NR];                                                                                \
        for (int m = 0; m < MR; ++m)                                                                      \
            for (int o = 0; o < NR; ++o) acc[m][o] = (f32x8){0};                                          \
        long i = 0;                                                                                       \
        for (; i + 8 <= n; i += 8) {                                                                      \
            f32x8 w[NR];                                                                                  \
            for (int o = 0; o < NR; ++o) w[o] = load8(W + o * n + i);                                     \
            for (int m = 0; m < MR; ++m) {                                                                \
                const f32x8 x = load8(X + m * ldx + i);                                                   \
                for (int o = 0; o < NR; ++o) acc[m][o] = fma8(w[o], x, acc[m][o]);                         \
            }                                                                                             \
        }                                                                                                 \
        for (int m = 0; m < MR; ++m)                                                                      \
            for (int o = 0; o < NR; ++o) {                                                                \
                float s = hsum8(acc[m][o]);                                                               \
                for (long j = i; j < n; ++j) s = fmaf(W[o * n + j], X[m * ldx + j], s);                   \
                out[m * NR + o] = s;                                                                      \
            }                                                                                             \
    }

DEFINE_TILE(1, 1)
DEFINE_TILE(2, 1)
DEFINE_TILE(3, 1)
DEFINE_TILE(4, 1)
DEFINE_TILE(1, 3)
DEFINE_TILE(2, 3)
DEFINE_TILE(3, 3)
DEFINE_TILE(4, 3)
DEFINE_TILE(1, 4)
DEFINE_TILE(2, 4)
DEFINE_TILE(3, 4)
DEFINE_TILE(1, 8)

typedef void (*tile_fn)(const float *restrict, const float *restrict, long, long, float *restrict);

/* Outputs per unit of parallel work: a multiple of the tile widths (3 and 4; 8 for one row). */
#define BLOCK 12
#define BLOCK_ONE_ROW 16

static inline float activate(float y, int act) {
    if (act == 1) return y > 0.0f ? y : 0.0f;                               /* ReLU */
    if (act == 2) return 0.5f * y * (1.0f + erff(y * 0.70710678118654752f)); /* exact GELU, x Φ(x) */
    if (act == 3) /* GELU's tanh approximation (Hendrycks & Gimpel 2016), GPT-2's */
        return 0.5f * y * (1.0f + tanhf(0.79788456080286536f * (y + 0.044715f * y * y * y)));
    return y;
}

/* Outputs o0 … o1 − 1 of Y (rows, ldy) = act(X (rows, ldx) Wᵀ + b), W (out, n) row-major. */
static void product_block(const float *restrict W, const float *restrict X, long ldx, const float *restrict b,
                          float *restrict Y, long ldy, long rows, long n, long o0, long o1, int act) {
    /* tiles[nr][mr]: four rows by three outputs where there are four rows (7 loads per 12
     * multiply-adds), else up to three rows by four outputs, and one row by eight (eight independent
     * sums: one row is otherwise held up by the latency of each multiply-add); one output at the end
     * of a block */
    static const tile_fn tiles[9][5] = {
        [1] = {0, tile_1_1, tile_2_1, tile_3_1, tile_4_1},
        [3] = {0, tile_1_3, tile_2_3, tile_3_3, tile_4_3},
        [4] = {0, tile_1_4, tile_2_4, tile_3_4, 0},
        [8] = {0, tile_1_8, 0, 0, 0},
    };
    float out[32];
    const long NR = rows >= 4 ? 3 : rows == 1 ? 8 : 4;
    for (long o = o0; o < o1;) {
        const long nr = o1 - o >= NR ? NR : 1;
        for (long m = 0; m < rows;) {
            const long mr = rows - m >= 4 ? 4 : rows - m;
            tiles[nr][mr](W + o * n, X + m * ldx, n, ldx, out);
            for (long i = 0; i < mr; ++i)
                for (long j = 0; j < nr; ++j)
                    Y[(m + i) * ldy + o + j] = activate(out[i * nr + j] + (b ? b[o + j] : 0.0f), act);
            m += mr;
        }
        o += nr;
    }
}

/* Y (rows, ldy) = act(X Wᵀ + b) for W (out, n), inside a parallel region: the output blocks are
 * shared out over the threads. */
static void linear_rows(const float *restrict W, const float *restrict X, long ldx, const float *restrict b,
                        float *restrict Y, long ldy, long rows, long out, long n, int act) {
    const long size = rows == 1 ? BLOCK_ONE_ROW : BLOCK, blocks = (out + size - 1) / size;
#pragma omp for schedule(static)
    for (long k = 0; k < blocks; ++k) {
        const long o0 = k * size, o1 = o0 + size < out ? o0 + size : out;
        product_block(W, X, ldx, b, Y, ldy, rows, n, o0, o1, act);
    }
}

/* `count` matrices of one shape (out, n) times the same rows, their outputs side by side in Y
 * (rows, count · out), in one work-sharing loop (one barrier, not count). */
static void linear_many(const float *const *W, const float *const *b, const float *restrict X, long ldx,
                        float *restrict Y, long rows, long count, long out, long n) {
    const long size = rows == 1 ? BLOCK_ONE_ROW : BLOCK, blocks = (out + size - 1) / size;
#pragma omp for schedule(static)
    for (long k = 0; k < count * blocks; ++k) {
        const long m = k / blocks, o0 = (k - m * blocks) * size, o1 = o0 + size < out ? o0 + size : out;
        product_block(W[m], X, ldx, b ? b[m] : 0, Y + m * out, count * out, rows, n, o0, o1, 0);
    }
}

/* ---- the threads of one kernel call ------------------------------------------------------------
 *
 * A decoding step is a few dozen work-sharing loops, each ending in a barrier. OpenMP's own barrier
 * sleeps at once under OMP_WAIT_POLICY=PASSIVE (the attnlab command's default outside training,
 * attnlab/openmp.py) and a sleeping thread takes tens of microseconds to wake: a step of a few rows
 * became several times slower. So the loops inside one call end in this barrier instead, which
 * spins for a short while (a loop of the step takes microseconds) and then gives the core away
 * (sched_yield), so that on a busy machine a thread whose partner was descheduled does not burn
 * its time waiting. Each thread of a call's parallel region calls team_enter first. */

#include <sched.h>
#include <stdatomic.h>

typedef struct {
    atomic_int arrived; /* threads at the current barrier */
    atomic_int phase;   /* barriers completed */
    int bf16;           /* the call's packed weights are bf16 (else fp32) */
} team_t;

static __thread team_t *team_now; /* the call this thread works for */
static __thread int team_seen;    /* barriers it has completed */

static void team_enter(team_t *team) {
    team_now = team;
    team_seen = 0;
}

static void team_sync(void) {
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

/* A loop shared out over the threads without OpenMP's barrier; team_sync() after it. */
#define SHARE _Pragma("omp for schedule(static) nowait")

/* ---- products with packed weights ---------------------------------------------------------------
 *
 * The decoder and encoder kernels below multiply by the same matrices at every step, so they take
 * them packed once (attnlab.accel.kernels.pack): W (out, n) as panels of 16 outputs, panel p
 * holding W[16p … 16p+15][k] for k = 0 … n−1 one after another (zeros past `out`). A tile of MR
 * rows × 16 outputs then keeps 2·MR accumulators in registers and, per k, loads two vectors of
 * the panel and broadcasts one number of each row: every load feeds several multiply-adds, no
 * horizontal sums are needed, and the panel (16 n floats) and the rows stay in the L1 cache
 * (the register tile of optimised matrix products, e.g. Goto & van de Geijn 2008).
 *
 * Each number is one multiply-add per k in order, whatever MR: a row gives the same bits alone or
 * beside others. */

#define PANEL 16

static inline f32x8 splat8(float v) {
    return (f32x8){v, v, v, v, v, v, v, v};
}

/* Eight bf16 numbers widened to fp32: a bf16 number is the upper half of an fp32 one, so this is
 * exact (weights stored in bf16 halve the bytes a step reads; the arithmetic stays fp32). */
typedef unsigned short u16x8 __attribute__((vector_size(16)));
typedef unsigned int u32x8 __attribute__((vector_size(32)));

static inline f32x8 load8_bf16(const unsigned short *p) {
    u16x8 h;
    memcpy(&h, p, sizeof h);
    const u32x8 w = __builtin_convertvector(h, u32x8) << 16;
    f32x8 f;
    memcpy(&f, &w, sizeof f);
    return f;
}

#define DEFINE_PANEL(MR, NAME, T, LOAD)                                                                   \
    static void NAME##_##MR(const void *restrict Pv, const float *restrict X, long ldx, long n,           \
                            f32x8 out[][2]) {                                                             \
        const T *restrict P = Pv;                                                                         \
        f32x8 acc[MR][2];                                                                                 \
        for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = (f32x8){0};                                  \
        for (long k = 0; k < n; ++k) {                                                                    \
            const f32x8 w0 = LOAD(P + k * PANEL), w1 = LOAD(P + k * PANEL + 8);                           \
            for (int m = 0; m < MR; ++m) {                                                                \
                const f32x8 x = splat8(X[m * ldx + k]);                                                   \
                acc[m][0] = fma8(w0, x, acc[m][0]);                                                       \
                acc[m][1] = fma8(w1, x, acc[m][1]);                                                       \
            }                                                                                             \
        }                                                                                                 \
        for (int m = 0; m < MR; ++m) out[m][0] = acc[m][0], out[m][1] = acc[m][1];                        \
    }

#define DEFINE_PANELS(NAME, T, LOAD)                                                                      \
    DEFINE_PANEL(1, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(2, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(3, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(4, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(5, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(6, NAME, T, LOAD)                                                                        \
    /* One row times two panels at once: four accumulators instead of two, so a single row is not   \
     * held up by the latency of each multiply-add (the numbers are those of NAME##_1). */            \
    static void NAME##_1x2(const void *restrict Pv, const void *restrict Qv, const float *restrict X, long n,   \
                           f32x8 out[][2]) {                                                              \
        const T *restrict P = Pv, *restrict Q = Qv;                                                       \
        f32x8 a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};                                                     \
        for (long k = 0; k < n; ++k) {                                                                    \
            const f32x8 x = splat8(X[k]);                                                                 \
            a0 = fma8(LOAD(P + k * PANEL), x, a0);                                                        \
            a1 = fma8(LOAD(P + k * PANEL + 8), x, a1);                                                    \
            b0 = fma8(LOAD(Q + k * PANEL), x, b0);                                                        \
            b1 = fma8(LOAD(Q + k * PANEL + 8), x, b1);                                                    \
        }                                                                                                 \
        out[0][0] = a0, out[0][1] = a1, out[1][0] = b0, out[1][1] = b1;                                   \
    }

DEFINE_PANELS(panel, float, load8)
DEFINE_PANELS(panel_bf16, unsigned short, load8_bf16)

typedef void (*panel_fn)(const void *restrict, const float *restrict, long, long, f32x8[][2]);
typedef void (*pair_fn)(const void *restrict, const void *restrict, const float *restrict, long, f32x8[][2]);

/* Y[m][o0 + j] = act(acc[m] + b), for the outputs of a panel that exist. */
static inline void store_panel(f32x8 acc[2], const float *restrict b, float *restrict y, long o0, long out, int act) {
    const long count = out - o0 < PANEL ? out - o0 : PANEL;
    for (long j = 0; j < count; ++j) y[o0 + j] = activate(acc[j / 8][j % 8] + (b ? b[o0 + j] : 0.0f), act);
}

/* Panels p0 … p1 − 1 of Y (rows, ldy) = act(X Wᵀ + b) with W packed (out outputs, n inputs), its
 * numbers fp32 or (bf16) bf16. */
static void packed_panels(const void *restrict Wp, int bf16, const float *restrict X, long ldx,
                          const float *restrict b, float *restrict Y, long ldy, long rows, long out, long n, long p0,
                          long p1, int act) {
    static const panel_fn panels[2][7] = {
        {0, panel_1, panel_2, panel_3, panel_4, panel_5, panel_6},
        {0, panel_bf16_1, panel_bf16_2, panel_bf16_3, panel_bf16_4, panel_bf16_5, panel_bf16_6},
    };
    const pair_fn pair = bf16 ? panel_bf16_1x2 : panel_1x2;
    const long size = (bf16 ? 2 : 4) * PANEL * n; /* bytes per panel */
    const char *W = Wp;
    f32x8 acc[6][2];
    if (rows == 1) {
        long p = p0;
        for (; p + 1 < p1; p += 2) {
            pair(W + p * size, W + (p + 1) * size, X, n, acc);
            store_panel(acc[0], b, Y, p * PANEL, out, act);
            store_panel(acc[1], b, Y, (p + 1) * PANEL, out, act);
        }
        if (p < p1) {
            panels[bf16][1](W + p * size, X, ldx, n, acc);
            store_panel(acc[0], b, Y, p * PANEL, out, act);
        }
        return;
    }
    for (long p = p0; p < p1; ++p)
        for (long m = 0; m < rows;) {
            const long mr = rows - m >= 6 ? 6 : rows - m;
            panels[bf16][mr](W + p * size, X + m * ldx, ldx, n, acc);
            for (long i = 0; i < mr; ++i) store_panel(acc[i], b, Y + (m + i) * ldy, p * PANEL, out, act);
            m += mr;
        }
}

/* Y (rows, ldy) = act(X Wᵀ + b) for a packed W of `out` outputs, inside a parallel region (the
 * panels shared out over the threads). */
static void packed_rows(const void *restrict Wp, const float *restrict X, long ldx, const float *restrict b,
                        float *restrict Y, long ldy, long rows, long out, long n, int act) {
    const long panels = (out + PANEL - 1) / PANEL;
    const int threads = omp_get_num_threads(), me = omp_get_thread_num();
    /* contiguous ranges of panels, in pairs for a single row (panel_1x2) */
    const long unit = rows == 1 ? 2 : 1, units = (panels + unit - 1) / unit;
    const long u0 = units * me / threads, u1 = units * (me + 1) / threads;
    const long p0 = u0 * unit, p1 = u1 * unit < panels ? u1 * unit : panels;
    if (p0 < p1) packed_panels(Wp, team_now->bf16, X, ldx, b, Y, ldy, rows, out, n, p0, p1, act);
    team_sync();
}

/* `count` packed matrices of one shape times the same rows, outputs side by side (rows, count·out). */
static void packed_many(const void *const *Wp, const float *const *b, const float *restrict X, long ldx,
                        float *restrict Y, long rows, long count, long out, long n) {
    const long panels = (out + PANEL - 1) / PANEL;
    SHARE
    for (long k = 0; k < count * panels; ++k) {
        const long m = k / panels, p = k - m * panels;
        packed_panels(Wp[m], team_now->bf16, X, ldx, b ? b[m] : 0, Y + m * out, count * out, rows, out, n, p, p + 1,
                      0);
    }
    team_sync();
}

/* W (out, n) row-major, of numbers of `size` bytes (4: fp32, 2: bf16) → its packed form
 * (ceil(out / 16) · 16 · n numbers, zeros past `out`), see above. */
void attnlab_pack(const void *restrict W, void *restrict Wp, long out, long n, long size) {
    const char *w = W;
    char *wp = Wp;
    const long panels = (out + PANEL - 1) / PANEL;
    for (long p = 0; p < panels; ++p)
        for (long k = 0; k < n; ++k)
            for (long j = 0; j < PANEL; ++j) {
                const long o = p * PANEL + j;
                char *to = wp + ((p * n + k) * PANEL + j) * size;
                if (o < out) memcpy(to, w + (o * n + k) * size, size);
                else memset(to, 0, size);
            }
}

/* Y (rows, out) = X Wᵀ + b with W packed, its numbers fp32 or (bf16) bf16: the product of the
 * decoder and encoder kernels, on its own (tested against torch). */
void attnlab_packed_rows_f32(const void *restrict Wp, const float *restrict X, const float *restrict b,
                             float *restrict Y, long rows, long out, long n, int bf16, int threads) {
    team_t team = {.bf16 = bf16};
#pragma omp parallel num_threads(threads)
    {
        team_enter(&team);
        packed_rows(Wp, X, n, b, Y, out, rows, out, n, 0);
    }
}

/* Y = X Wᵀ + b. Shapes: W (out, n) row-major and contiguous, X (rows, n) contiguous, b (out,) or
 * NULL, Y (rows, out). */
void attnlab_linear_rows_f32(const float *restrict W, const float *restrict X, const float *restrict b,
                             float *restrict Y, long rows, long out, long n, int threads) {
#pragma omp parallel num_threads(threads)
    linear_rows(W, X, n, b, Y, out, rows, out, n, 0);
}

/* `count` matrices of one shape times the same rows, their outputs side by side: the query, key
 * and value projections of a decoding step in one parallel region instead of three (each region
 * costs a fork and a barrier, comparable to streaming a small matrix). The numbers of
 * attnlab_linear_rows_f32.
 *
 * Shapes: W[m] (out, n) row-major and contiguous for m < count, X (rows, n) contiguous, b NULL or
 * b[m] (out,), Y (rows, count * out) with Y[i][m * out + o] = W[m][o] . X[i] + b[m][o]. */
void attnlab_gemv_many_f32(const float *const *W, const float *restrict X, const float *const *b,
                           float *restrict Y, long rows, long count, long out, long n, int threads) {
#pragma omp parallel num_threads(threads)
    linear_many(W, b, X, n, Y, rows, count, out, n);
}

/* Scaled dot-product attention of a single query per (batch, head) over S keys, the step of
 * incremental decoding (Vaswani et al. 2017, eq. 1): out = softmax(scale * K q) V, by attend_row.
 * One (batch, head) pair per iteration of the parallel loop.
 *
 * Query row b reads the keys and values of row b / groups (cross-attention in beam search: the
 * `groups` hypotheses of a sentence share its source), and only their first lengths[b / groups]
 * positions when `lengths` is given (the real tokens of a right-padded source; NULL: all S). A
 * row with no position to attend to gets zeros.
 *
 * Shapes (strides in floats): q (B, H, Dh) with strides (q_sb, q_sh, 1); K and V (B / groups, H,
 * S, Dh) with the same strides (kv_sb, kv_sh, Dh, 1); lengths (B / groups,) or NULL; out (B, H, Dh)
 * contiguous. */
void attnlab_attend_one_f32(const float *restrict q, const float *restrict K, const float *restrict V,
                            float *restrict out, long B, long H, long S, long Dh, long q_sb, long q_sh,
                            long kv_sb, long kv_sh, long groups, const long *restrict lengths, float scale,
                            int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long bh = 0; bh < B * H; ++bh) {
        const long b = bh / H, h = bh - b * H, src = b / groups;
        const long n = lengths ? lengths[src] : S;
        const float *qi = q + b * q_sb + h * q_sh;
        const float *k = K + src * kv_sb + h * kv_sh, *v = V + src * kv_sb + h * kv_sh;
        attend_row(qi, k, v, n, Dh, scale, out + bh * Dh);
    }
}

/* LayerNorm of each of `rows` rows of D floats (Ba et al. 2016), as torch.nn.LayerNorm: mean and
 * biased variance per row, y = (x - mean) / sqrt(var + eps) * w + b. y may be x. */
static void layer_norm_row(const float *x, float *y, long D, const float *w, const float *b, float eps) {
    double mean = 0.0, var = 0.0;
    for (long d = 0; d < D; ++d) mean += x[d];
    mean /= (double)D;
    for (long d = 0; d < D; ++d) {
        const double t = x[d] - mean;
        var += t * t;
    }
    const float rstd = 1.0f / sqrtf((float)(var / (double)D) + eps);
    const float m = (float)mean;
    for (long d = 0; d < D; ++d) y[d] = (x[d] - m) * rstd * w[d] + (b ? b[d] : 0.0f);
}

static void layer_norm_rows(const float *x, float *y, long rows, long D, const float *w, const float *b, float eps) {
    SHARE
    for (long i = 0; i < rows; ++i) layer_norm_row(x + i * D, y + i * D, D, w, b, eps);
    team_sync();
}

/* x += t (pre-norm), or x = LayerNorm(x + t) (post-norm). */
static void residual(float *x, const float *t, long rows, long D, int pre, const float *w, const float *b, float eps) {
    SHARE
    for (long i = 0; i < rows; ++i) {
        for (long d = 0; d < D; ++d) x[i * D + d] += t[i * D + d];
        if (!pre) layer_norm_row(x + i * D, x + i * D, D, w, b, eps);
    }
    team_sync();
}

/* A sub-layer's input: LayerNorm(x) into h before it (pre-norm), else x itself. */
static const float *sublayer_input(const float *x, float *h, long rows, long D, int pre, const float *w, const float *b,
                                   float eps) {
    if (!pre) return x;
    layer_norm_rows(x, h, rows, D, w, b, eps);
    return h;
}

/* x[i] = table[tokens[i]] · scale + pe[pos] (the token embedding times √D plus the positional code,
 * Vaswani et al. 2017, §3.4 and §3.5) for rows at position pos; pe (positions, D) row-major. */
static void embed_rows(const float *restrict table, const long *restrict tokens, long pos, const float *restrict pe,
                       float scale, float *restrict x, long rows, long D) {
    SHARE
    for (long i = 0; i < rows; ++i) {
        const float *e = table + tokens[i] * D, *p = pe + pos * D;
        for (long d = 0; d < D; ++d) x[i * D + d] = e[d] * scale + p[d];
    }
    team_sync();
}

/* The parameters of one layer, in the order the Python side lists them (biases may be NULL):
 * decoder, 22: 0-5 the self, cross and feed-forward LayerNorms' weight and bias; 6-13 Wq bq Wk bk
 * Wv bv Wo bo of the self-attention (D, D); 14-17 Wq bq Wo bo of the cross-attention; 18-21 W1
 * (F, D) b1 W2 (D, F) b2 of the feed-forward. Encoder, 16: 0-3 the self and feed-forward
 * LayerNorms; 4-11 Wq bq Wk bk Wv bv Wo bo; 12-15 W1 b1 W2 b2. Every weight matrix packed (see
 * attnlab_pack). */
#define DECODER_PARAMS 22
#define ENCODER_PARAMS 16

/* Scratch floats of decoder_layer and encoder_layer for `rows` rows. */
#define DECODER_SCRATCH(rows, D, F) ((rows) * (6 * (D) + (F)))
#define ENCODER_SCRATCH(rows, D, F) ((rows) * (8 * (D) + (F)))

/* The feed-forward sub-layer (§3.3) with its residual, inside a parallel region. */
static void feed_forward(const float *const *P, float *restrict x, float *restrict h, float *restrict t,
                         float *restrict f, long rows, long D, long F, int pre, int act, float eps) {
    const float *in = sublayer_input(x, h, rows, D, pre, P[0], P[1], eps);
    packed_rows(P[2], in, D, P[3], f, F, rows, F, D, act);
    packed_rows(P[4], f, F, P[5], t, D, rows, D, F, 0);
    residual(x, t, rows, D, pre, P[0], P[1], eps);
}

/* One decoding step of a Transformer decoder layer (Vaswani et al. 2017, §3.1) for `rows` rows,
 * one new target position each, inside a parallel region: causal self-attention over a key/value
 * cache, source–target attention over the projected source, feed-forward; each with its residual
 * and LayerNorm before (pre-norm) or after (post-norm). The operations of attnlab's DecoderBlock.
 *
 * x (rows, D): the residual stream, updated in place. Kc, Vc (rows, H, cap, Dh): the cache, whose
 * first L positions are filled; position L is written here. Km, Vm (rows / groups, H, S, Dh): the
 * projected source; row i attends to the first lengths[i / groups] positions of row i / groups
 * (Km NULL: no source, the layer of a decoder-only model such as GPT). scratch: DECODER_SCRATCH
 * floats. act: 1 ReLU, 2 GELU, 3 GELU's tanh approximation. */
static void decoder_layer(const float *const *P, float *restrict x, float *restrict Kc, float *restrict Vc,
                          const float *restrict Km, const float *restrict Vm, const long *restrict lengths,
                          float *restrict scratch, long rows, long D, long H, long F, long cap, long L, long S,
                          long groups, int pre, int act, float eps) {
    const long Dh = D / H;
    const float scale = 1.0f / sqrtf((float)Dh);
    float *h = scratch, *qkv = h + rows * D, *ctx = qkv + rows * 3 * D, *t = ctx + rows * D, *f = t + rows * D;
    const void *W[3] = {P[6], P[8], P[10]};
    const float *b[3] = {P[7], P[9], P[11]};
    /* self-attention: the new position's query, key and value; the key and value into the cache */
    const float *in = sublayer_input(x, h, rows, D, pre, P[0], P[1], eps);
    packed_many(W, b[0] || b[1] || b[2] ? b : 0, in, D, qkv, rows, 3, D, D);
    SHARE
    for (long bh = 0; bh < rows * H; ++bh) {
        const long i = bh / H, head = bh - i * H;
        const long base = (i * H + head) * cap * Dh;
        memcpy(Kc + base + L * Dh, qkv + i * 3 * D + D + head * Dh, Dh * sizeof(float));
        memcpy(Vc + base + L * Dh, qkv + i * 3 * D + 2 * D + head * Dh, Dh * sizeof(float));
        attend_row(qkv + i * 3 * D + head * Dh, Kc + base, Vc + base, L + 1, Dh, scale, ctx + i * D + head * Dh);
    }
    team_sync();
    packed_rows(P[12], ctx, D, P[13], t, D, rows, D, D, 0);
    residual(x, t, rows, D, pre, P[0], P[1], eps);
    if (Km) { /* source–target attention (none in a decoder-only model) */
        in = sublayer_input(x, h, rows, D, pre, P[2], P[3], eps);
        packed_rows(P[14], in, D, P[15], qkv, D, rows, D, D, 0);
        SHARE
        for (long bh = 0; bh < rows * H; ++bh) {
            const long i = bh / H, head = bh - i * H, src = i / groups;
            const long base = (src * H + head) * S * Dh;
            attend_row(qkv + i * D + head * Dh, Km + base, Vm + base, lengths[src], Dh, scale, ctx + i * D + head * Dh);
        }
        team_sync();
        packed_rows(P[16], ctx, D, P[17], t, D, rows, D, D, 0);
        residual(x, t, rows, D, pre, P[2], P[3], eps);
    }
    /* feed-forward */
    const float *ff[6] = {P[4], P[5], P[18], P[19], P[20], P[21]};
    feed_forward(ff, x, h, t, f, rows, D, F, pre, act, eps);
}

/* A whole decoding step of a Transformer decoder in one call and one parallel region: the new
 * tokens' embeddings at position L, every layer (decoder_layer), the final LayerNorm of a
 * pre-norm stack (final_w NULL: none) and the projection to the vocabulary. A step of a few rows
 * is mostly the fixed cost of each tensor operation, of which this does none.
 *
 * P: n_layers × DECODER_PARAMS pointers. tokens (rows,); table (V, D); pe (positions, D). Kc[l],
 * Vc[l] (rows, H, cap, Dh) and Km[l], Vm[l] (rows / groups, H, S, Dh) per layer, as decoder_layer
 * (Km NULL: a decoder-only model). Wout (V, D) packed, bout (V,) or NULL; logits (rows, V): the output. x: rows · D floats of
 * working memory; scratch: DECODER_SCRATCH floats. */
void attnlab_decoder_step_f32(const float *const *P, long n_layers, const float *restrict table,
                              const long *restrict tokens, const float *restrict pe, float embed_scale,
                              float *const *Kc, float *const *Vc, const float *const *Km, const float *const *Vm,
                              const long *restrict lengths, const float *restrict final_w,
                              const float *restrict final_b, const float *restrict Wout, const float *restrict bout,
                              long V, float *restrict logits, float *restrict x, float *restrict scratch, long rows,
                              long D, long H, long F, long cap, long L, long S, long groups, int pre, int act,
                              float eps, int bf16, int threads) {
    team_t team = {.bf16 = bf16};
#pragma omp parallel num_threads(threads)
    {
        team_enter(&team);
        embed_rows(table, tokens, L, pe, embed_scale, x, rows, D);
        for (long l = 0; l < n_layers; ++l)
            decoder_layer(P + l * DECODER_PARAMS, x, Kc[l], Vc[l], Km ? Km[l] : 0, Vm ? Vm[l] : 0, lengths, scratch,
                          rows, D, H, F, cap, L, S, groups, pre, act, eps);
        if (final_w) layer_norm_rows(x, x, rows, D, final_w, final_b, eps);
        packed_rows(Wout, x, D, bout, logits, V, rows, V, D, 0);
    }
}

/* One Transformer encoder layer (§3.1) over B right-padded sentences of S positions, inside a
 * parallel region: self-attention of every position over the first lengths[b] positions of its
 * sentence (the padding is never attended to), then the feed-forward; pre- or post-norm. The
 * operations of attnlab's EncoderBlock with a key-padding mask.
 *
 * x (B·S, D) updated in place; scratch: ENCODER_SCRATCH floats. */
static void encoder_layer(const float *const *P, float *restrict x, const long *restrict lengths,
                          float *restrict scratch, long B, long S, long D, long H, long F, int pre, int act,
                          float eps) {
    const long rows = B * S, Dh = D / H;
    const float scale = 1.0f / sqrtf((float)Dh);
    float *h = scratch, *qkv = h + rows * D, *k = qkv + rows * 3 * D, *v = k + rows * D, *ctx = v + rows * D;
    float *t = ctx + rows * D, *f = t + rows * D;
    const void *W[3] = {P[4], P[6], P[8]};
    const float *b[3] = {P[5], P[7], P[9]};
    const float *in = sublayer_input(x, h, rows, D, pre, P[0], P[1], eps);
    packed_many(W, b[0] || b[1] || b[2] ? b : 0, in, D, qkv, rows, 3, D, D);
    /* keys and values to (B, H, S, Dh): each head's positions one after another, as attend_row reads them */
    SHARE
    for (long r = 0; r < rows; ++r) {
        const long bb = r / S, s = r - bb * S;
        for (long head = 0; head < H; ++head) {
            const long at = ((bb * H + head) * S + s) * Dh;
            memcpy(k + at, qkv + r * 3 * D + D + head * Dh, Dh * sizeof(float));
            memcpy(v + at, qkv + r * 3 * D + 2 * D + head * Dh, Dh * sizeof(float));
        }
    }
    team_sync();
    SHARE
    for (long rh = 0; rh < rows * H; ++rh) {
        const long r = rh / H, head = rh - r * H, bb = r / S;
        const long base = (bb * H + head) * S * Dh;
        attend_row(qkv + r * 3 * D + head * Dh, k + base, v + base, lengths[bb], Dh, scale, ctx + r * D + head * Dh);
    }
    team_sync();
    packed_rows(P[10], ctx, D, P[11], t, D, rows, D, D, 0);
    residual(x, t, rows, D, pre, P[0], P[1], eps);
    const float *ff[6] = {P[2], P[3], P[12], P[13], P[14], P[15]};
    feed_forward(ff, x, h, t, f, rows, D, F, pre, act, eps);
}

/* The encoder of a translator and its hand-over to the decoder in one call and one parallel
 * region, for a batch small enough that the fixed cost of each tensor operation is most of the
 * work: the source embeddings, every encoder layer (encoder_layer), the final LayerNorm of a
 * pre-norm stack (final_w NULL: none), and each decoder layer's source keys and values (its
 * cross-attention's Wk, Wv; the decoder computes them once per sentence, not per step).
 *
 * P: n_layers × ENCODER_PARAMS pointers; src (B, S) right-padded, lengths (B,) its real tokens;
 * C: n_cross × 4 pointers Wk bk Wv bv; Km[l], Vm[l] (B, H, S, Dh): the outputs. x: B·S·D floats
 * of working memory (the encoder's output on return); scratch: ENCODER_SCRATCH floats. */
void attnlab_encoder_f32(const float *const *P, long n_layers, const float *restrict table, const long *restrict src,
                         const float *restrict pe, float embed_scale, const long *restrict lengths,
                         const float *restrict final_w, const float *restrict final_b, const float *const *C,
                         long n_cross, float *const *Km, float *const *Vm, float *restrict x, float *restrict scratch,
                         long B, long S, long D, long H, long F, int pre, int act, float eps, int bf16, int threads) {
    const long rows = B * S, Dh = D / H;
    team_t team = {.bf16 = bf16};
#pragma omp parallel num_threads(threads)
    {
        team_enter(&team);
        SHARE
        for (long r = 0; r < rows; ++r) {
            const float *e = table + src[r] * D, *p = pe + (r % S) * D;
            for (long d = 0; d < D; ++d) x[r * D + d] = e[d] * embed_scale + p[d];
        }
        team_sync();
        for (long l = 0; l < n_layers; ++l)
            encoder_layer(P + l * ENCODER_PARAMS, x, lengths, scratch, B, S, D, H, F, pre, act, eps);
        if (final_w) layer_norm_rows(x, x, rows, D, final_w, final_b, eps);
        for (long l = 0; l < n_cross; ++l) {
            const void *W[2] = {C[4 * l], C[4 * l + 2]};
            const float *b[2] = {C[4 * l + 1], C[4 * l + 3]};
            packed_many(W, b[0] || b[1] ? b : 0, x, D, scratch, rows, 2, D, D);
            SHARE
            for (long r = 0; r < rows; ++r) {
                const long bb = r / S, s = r - bb * S;
                for (long head = 0; head < H; ++head) {
                    const long at = ((bb * H + head) * S + s) * Dh;
                    memcpy(Km[l] + at, scratch + r * 2 * D + head * Dh, Dh * sizeof(float));
                    memcpy(Vm[l] + at, scratch + r * 2 * D + D + head * Dh, Dh * sizeof(float));
                }
            }
            team_sync();
        }
    }
}

/* ---- choosing the next tokens ------------------------------------------------------------------ */

typedef int i32x8 __attribute__((vector_size(32)));

static inline f32x8 max8(f32x8 a, f32x8 b) {
    const i32x8 c = a > b;
    return (f32x8)((c & (i32x8)a) | (~c & (i32x8)b));
}

/* e^x for x ≤ 0, eight at a time: x = n ln 2 + g with |g| ≤ ln 2 / 2, e^g by the degree-7 polynomial
 * of Cephes' expf (relative error ~1e-7), 2^n from the exponent bits. Below −87.3 it returns
 * ~1e-38 instead of a denormal or 0, which no sum of these terms (one of them is 1) can notice. */
static inline f32x8 exp8(f32x8 x) {
    const f32x8 lo = {-87.3f, -87.3f, -87.3f, -87.3f, -87.3f, -87.3f, -87.3f, -87.3f};
    x = max8(x, lo);
    const float magic = 12582912.0f; /* 1.5 · 2^23: adding it rounds to an integer in the low bits */
    const f32x8 t = x * 1.44269504088896341f + magic;
    const f32x8 n = t - magic;
    const f32x8 g = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    f32x8 p = 1.9875691500e-4f * g + 1.3981999507e-3f;
    p = p * g + 8.3334519073e-3f;
    p = p * g + 4.1665795894e-2f;
    p = p * g + 1.6666665459e-1f;
    p = p * g + 5.0000001201e-1f;
    p = p * (g * g) + g + 1.0f;
    const i32x8 bits = ((i32x8)t - 0x4B400000 + 127) << 23;
    return p * (f32x8)bits;
}

/* Put (v, id) into the descending list val/idx of `have` entries (at most K), after any entry
 * equal to v: of equal values the earlier index comes first, as a stable sort would have it. */
static inline long insert_top(float *val, long *idx, long have, long K, float v, long id) {
    long p = have < K ? have++ : K - 1;
    while (p > 0 && val[p - 1] < v) {
        val[p] = val[p - 1];
        idx[p] = idx[p - 1];
        --p;
    }
    val[p] = v;
    idx[p] = id;
    return have;
}

/* The K largest of x[0 … V−1] (K ≤ V), descending, of equal values the earlier first. One pass;
 * a block of 64 whose largest value does not beat the K-th best so far costs eight vector maxima. */
static void top_k(const float *restrict x, long V, long K, float *restrict val, long *restrict idx) {
    long have = 0, j = 0;
    for (; j < V && have < K; ++j) have = insert_top(val, idx, have, K, x[j], j);
    float thr = val[K - 1];
    for (; j + 64 <= V; j += 64) {
        f32x8 m = load8(x + j);
        for (int c = 1; c < 8; ++c) m = max8(m, load8(x + j + 8 * c));
        if (!(m[0] > thr || m[1] > thr || m[2] > thr || m[3] > thr || m[4] > thr || m[5] > thr || m[6] > thr ||
              m[7] > thr))
            continue;
        for (long l = j; l < j + 64; ++l)
            if (x[l] > thr) {
                insert_top(val, idx, K, K, x[l], l);
                thr = val[K - 1];
            }
    }
    for (; j < V; ++j)
        if (x[j] > thr) {
            insert_top(val, idx, K, K, x[j], j);
            thr = val[K - 1];
        }
}

/* log Σ_j e^(x_j − top) over a row whose largest value is top. */
static float log_sum_exp_below(const float *restrict x, long V, float top) {
    f32x8 s0 = {0}, s1 = {0};
    const f32x8 m = {top, top, top, top, top, top, top, top};
    long j = 0;
    for (; j + 16 <= V; j += 16) {
        s0 += exp8(load8(x + j) - m);
        s1 += exp8(load8(x + j + 8) - m);
    }
    for (; j + 8 <= V; j += 8) s0 += exp8(load8(x + j) - m);
    float s = hsum8(s0 + s1);
    for (; j < V; ++j) s += expf(x[j] - top);
    return logf(s);
}

/* The K most likely next tokens of a row of logits and their log-probabilities (log-softmax over
 * the row, then the top K; of equal values the smaller token id first). */
static void top_k_log_softmax(const float *restrict logits, long V, long K, float *restrict val,
                              long *restrict idx) {
    top_k(logits, V, K, val, idx);
    const float lse = val[0] + log_sum_exp_below(logits, V, val[0]);
    for (long i = 0; i < K; ++i) val[i] = logits[idx[i]] - lse;
}

/* For each of `rows` rows of logits (rows, V): the K most likely tokens, log-probabilities val
 * (rows, K) and ids idx (rows, K). Greedy decoding with K = 1. */
void attnlab_top_k_log_softmax_f32(const float *restrict logits, long rows, long V, long K, float *restrict val,
                                   long *restrict idx, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long r = 0; r < rows; ++r) top_k_log_softmax(logits + r * V, V, K, val + r * K, idx + r * K);
}

/* One step of beam search's bookkeeping (attnlab.decode.beam_search) for n sentences of k rows
 * each, K beams: every live row offers its K best extensions (score + log-probability), a
 * finished row (ended[r] < t) only itself, unchanged, extended by padding; each sentence keeps
 * the K best of its k·K offers (of equal scores the earlier offer). A sentence's K best
 * extensions are among the K best of each of its rows, so nothing else is needed.
 *
 * logits (n·k, V); scores, ended (n·k,) the rows' scores and the step at which each ended
 * (max_len while live); cand_val, cand_tok: n·k·K of working memory. Outputs per new row
 * (n·K): its score, the row it extends (index), its token, and when it ended (t if the token
 * is EOS of a live row). */
void attnlab_beam_step_f32(const float *restrict logits, long V, long n, long k, long K, const float *restrict scores,
                           const long *restrict ended, long t, long max_len, long eos, long pad,
                           float *restrict cand_val, long *restrict cand_tok, float *restrict new_scores,
                           long *restrict index, long *restrict tok, long *restrict new_ended, int threads) {
    team_t team = {0};
#pragma omp parallel num_threads(threads)
    {
        team_enter(&team);
        SHARE
        for (long r = 0; r < n * k; ++r) {
            float *val = cand_val + r * K;
            long *id = cand_tok + r * K;
            if (ended[r] < t) {
                val[0] = scores[r];
                id[0] = pad;
                for (long i = 1; i < K; ++i) {
                    val[i] = -INFINITY;
                    id[i] = pad;
                }
            } else {
                top_k_log_softmax(logits + r * V, V, K, val, id);
                for (long i = 0; i < K; ++i) val[i] += scores[r];
            }
        }
        team_sync();
        SHARE
        for (long j = 0; j < n; ++j) {
            float best[64];
            long pick[64];
            top_k(cand_val + j * k * K, k * K, K, best, pick);
            for (long i = 0; i < K; ++i) {
                const long row = j * k + pick[i] / K, token = cand_tok[j * k * K + pick[i]];
                const long e = ended[row];
                new_scores[j * K + i] = best[i];
                index[j * K + i] = row;
                tok[j * K + i] = token;
                new_ended[j * K + i] = token == eos && e == max_len ? t : e;
            }
        }
        team_sync();
    }
}
