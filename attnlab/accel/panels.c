/* The register tiles of attnlab's matrix products, built once per instruction set.
 *
 * attnlab/accel/kernels.py compiles this file once for each ISA the CPU has (layout.py's ISAS),
 * with that ISA's flags and -DISA=<name> -DVW=<floats per vector>: "generic" (plain C, eight-float
 * vectors), "avx2" (eight-float FMA), "avx512" (sixteen floats, one register per panel), and
 * "avx512_bf16" (avx512, plus the BF16 dot product for bf16 weights packed in pairs). Each build
 * exports its kernels as attnlab_isa_<name> (common.h, isa_kernels_t); products.c picks one per
 * call, so that a test can run every variant the machine has.
 *
 * The product, Y = act(X Wᵀ + b) for a few rows of X, with W packed once (attnlab_pack) into panels
 * of PANEL outputs, panel p holding W[16p … 16p+15][k] for k = 0 … n−1 one after another, for the
 * layer kernels. A tile of MR rows × one panel keeps MR·16 sums in registers and, per k, loads the
 * panel's 16 weights and broadcasts one number of each row: every load feeds several multiply-adds,
 * no horizontal sums, and the panel and rows stay in the L1 cache (the register tile of optimised
 * matrix products, Goto & van de Geijn 2008). Each number is one multiply-add per k in order, so it
 * is the same bits whatever MR, and the same in every ISA but the BF16 dot product (which rounds the
 * rows to bf16 and adds two products at once).
 */

#include "common.h"

#if !defined(ISA) || !defined(VW)
#error "built by attnlab/accel/kernels.py with -DISA=<name> -DVW=<8 or 16>"
#endif

/* VW floats in one vector; VW bf16 numbers beside them, and their widened bits. */
typedef float vf __attribute__((vector_size(VW * 4)));
typedef unsigned short vh __attribute__((vector_size(VW * 2)));
typedef unsigned int vu __attribute__((vector_size(VW * 4)));

#define NV (PANEL / VW) /* vectors per panel row */

#if VW == 16
static inline vf vfma(vf a, vf b, vf c) {
    return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
}
#define MR_MAX 8     /* rows per packed tile: 8 sums of one register each, of 32 registers */
#define ONE_ROW 4    /* panels one row takes at once: four independent sums hide the FMA's latency */
#elif defined(__FMA__)
static inline vf vfma(vf a, vf b, vf c) {
    return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
}
#define MR_MAX 6     /* 6 rows × 2 registers of sums, of 16 registers */
#define ONE_ROW 2
#else
static inline vf vfma(vf a, vf b, vf c) {
    vf r;
    for (int i = 0; i < VW; ++i) r[i] = fmaf(a[i], b[i], c[i]);
    return r;
}
#define MR_MAX 6
#define ONE_ROW 2
#endif

static inline vf vload(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v); /* an unaligned load */
    return v;
}

/* VW bf16 numbers widened to fp32: a bf16 number is the upper half of an fp32 one, so this is exact
 * (weights stored in bf16 halve the bytes a step reads; the arithmetic stays fp32). */
static inline vf vload_bf16(const unsigned short *p) {
    vh h;
    memcpy(&h, p, sizeof h);
    const vu w = __builtin_convertvector(h, vu) << 16;
    vf f;
    memcpy(&f, &w, sizeof f);
    return f;
}

static inline vf vsplat(float v) {
    return (vf){0} + v;
}

/* ---- W packed --------------------------------------------------------------------------------- */

#define DEFINE_PANEL(MR, NAME, T, LOAD)                                                                   \
    static void NAME##_##MR(const void *restrict Pv, const float *restrict X, long ldx, long n,           \
                            vf out[][NV]) {                                                               \
        const T *restrict P = Pv;                                                                         \
        vf acc[MR][NV];                                                                                   \
        for (int m = 0; m < MR; ++m)                                                                      \
            for (int v = 0; v < NV; ++v) acc[m][v] = (vf){0};                                             \
        for (long k = 0; k < n; ++k) {                                                                    \
            vf w[NV];                                                                                     \
            for (int v = 0; v < NV; ++v) w[v] = LOAD(P + k * PANEL + v * VW);                             \
            for (int m = 0; m < MR; ++m) {                                                                \
                const vf x = vsplat(X[m * ldx + k]);                                                      \
                for (int v = 0; v < NV; ++v) acc[m][v] = vfma(w[v], x, acc[m][v]);                         \
            }                                                                                             \
        }                                                                                                 \
        for (int m = 0; m < MR; ++m)                                                                      \
            for (int v = 0; v < NV; ++v) out[m][v] = acc[m][v];                                           \
    }

/* One row times ONE_ROW panels at once (their starts `size` bytes apart): ONE_ROW·NV independent
 * sums instead of NV, so a single row is not held up by the latency of each multiply-add (the
 * numbers are those of NAME##_1). */
#define DEFINE_ONE_ROW(NAME, T, LOAD)                                                                     \
    static void NAME##_one(const char *restrict W, long size, const float *restrict X, long n,            \
                           vf out[][NV]) {                                                                \
        const T *P[ONE_ROW];                                                                              \
        vf acc[ONE_ROW][NV];                                                                              \
        for (int u = 0; u < ONE_ROW; ++u) {                                                               \
            P[u] = (const T *)(W + u * size);                                                             \
            for (int v = 0; v < NV; ++v) acc[u][v] = (vf){0};                                             \
        }                                                                                                 \
        for (long k = 0; k < n; ++k) {                                                                    \
            const vf x = vsplat(X[k]);                                                                    \
            for (int u = 0; u < ONE_ROW; ++u)                                                             \
                for (int v = 0; v < NV; ++v) acc[u][v] = vfma(LOAD(P[u] + k * PANEL + v * VW), x, acc[u][v]); \
        }                                                                                                 \
        for (int u = 0; u < ONE_ROW; ++u)                                                                 \
            for (int v = 0; v < NV; ++v) out[u][v] = acc[u][v];                                           \
    }

#define DEFINE_PANELS(NAME, T, LOAD)                                                                      \
    DEFINE_PANEL(1, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(2, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(3, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(4, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(5, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(6, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(7, NAME, T, LOAD)                                                                        \
    DEFINE_PANEL(8, NAME, T, LOAD)                                                                        \
    DEFINE_ONE_ROW(NAME, T, LOAD)

DEFINE_PANELS(panel, float, vload)
DEFINE_PANELS(panel_bf16, unsigned short, vload_bf16)

typedef void (*panel_fn)(const void *restrict, const float *restrict, long, long, vf[][NV]);
typedef void (*one_row_fn)(const char *restrict, long, const float *restrict, long, vf[][NV]);

/* Y[o0 + j] = act(acc + b), for the outputs of a panel that exist. */
static inline void store_panel(const vf acc[NV], const float *restrict b, float *restrict y, long o0, long out,
                               int act) {
    float s[PANEL];
    memcpy(s, acc, sizeof s);
    const long count = out - o0 < PANEL ? out - o0 : PANEL;
    for (long j = 0; j < count; ++j) y[o0 + j] = activate(s[j] + (b ? b[o0 + j] : 0.0f), act);
}

#if defined(DPBF16)
static void packed_pairs(const void *restrict Wp, const unsigned *restrict XB, long np, const float *restrict b,
                         float *restrict Y, long ldy, long rows, long out, long p0, long p1, int act);
#endif

static void packed(const void *restrict Wp, int weights, const void *restrict Xv, long ldx,
                   const float *restrict b, float *restrict Y, long ldy, long rows, long out, long n, long p0,
                   long p1, int act) {
#if defined(DPBF16)
    if (weights == WEIGHTS_BF16_PAIRS) {
        packed_pairs(Wp, Xv, ldx, b, Y, ldy, rows, out, p0, p1, act);
        return;
    }
#endif
    const float *restrict X = Xv;
    static const panel_fn panels[2][9] = {
        {0, panel_1, panel_2, panel_3, panel_4, panel_5, panel_6, panel_7, panel_8},
        {0, panel_bf16_1, panel_bf16_2, panel_bf16_3, panel_bf16_4, panel_bf16_5, panel_bf16_6, panel_bf16_7,
         panel_bf16_8},
    };
    const int bf16 = weights == WEIGHTS_BF16;
    const one_row_fn one = bf16 ? panel_bf16_one : panel_one;
    const long size = (bf16 ? 2 : 4) * PANEL * n; /* bytes per panel */
    const char *W = Wp;
    vf acc[MR_MAX][NV];
    if (rows == 1) {
        long p = p0;
        for (; p + ONE_ROW <= p1; p += ONE_ROW) {
            one(W + p * size, size, X, n, acc);
            for (int u = 0; u < ONE_ROW; ++u) store_panel(acc[u], b, Y, (p + u) * PANEL, out, act);
        }
        for (; p < p1; ++p) {
            panels[bf16][1](W + p * size, X, ldx, n, acc);
            store_panel(acc[0], b, Y, p * PANEL, out, act);
        }
        return;
    }
    for (long p = p0; p < p1; ++p)
        for (long m = 0; m < rows;) {
            const long mr = rows - m >= MR_MAX ? MR_MAX : rows - m;
            panels[bf16][mr](W + p * size, X + m * ldx, ldx, n, acc);
            for (long i = 0; i < mr; ++i) store_panel(acc[i], b, Y + (m + i) * ldy, p * PANEL, out, act);
            m += mr;
        }
}

/* ---- bf16 weights in pairs, by the AVX-512 BF16 dot product ------------------------------------
 *
 * _mm512_dpbf16_ps adds to each of 16 fp32 sums the two products of a pair of bf16 numbers: 32
 * multiply-adds of bf16 weights in one instruction, where widening them costs two more. Its inputs
 * are both bf16, so the rows are rounded to bf16 (to nearest even) first: the numbers differ from
 * the fp32 arithmetic of the other variants by that rounding. Packed (WEIGHTS_BF16_PAIRS) as panels
 * of 16 outputs holding, pair by pair of inputs k = 2j, 2j + 1, the 16 outputs' two weights side by
 * side (a zero weight for the k = n of an odd n). */
#if defined(DPBF16)

#define DEFINE_PAIRS(MR)                                                                                  \
    static void pairs_##MR(const unsigned short *restrict P, const unsigned *restrict XB, long ldxb,      \
                           long np, __m512 out[]) {                                                       \
        __m512 acc[MR];                                                                                   \
        for (int m = 0; m < MR; ++m) acc[m] = _mm512_setzero_ps();                                        \
        for (long j = 0; j < np; ++j) {                                                                   \
            const __m512i w = _mm512_loadu_si512(P + j * 2 * PANEL);                                      \
            for (int m = 0; m < MR; ++m)                                                                  \
                acc[m] = _mm512_dpbf16_ps(acc[m], (__m512bh)w, (__m512bh)_mm512_set1_epi32(XB[m * ldxb + j])); \
        }                                                                                                 \
        for (int m = 0; m < MR; ++m) out[m] = acc[m];                                                     \
    }

DEFINE_PAIRS(1)
DEFINE_PAIRS(2)
DEFINE_PAIRS(3)
DEFINE_PAIRS(4)
DEFINE_PAIRS(5)
DEFINE_PAIRS(6)
DEFINE_PAIRS(7)
DEFINE_PAIRS(8)

/* One row times ONE_ROW panels at once, as NAME##_one above. */
static void pairs_one(const unsigned short *restrict W, long size, const unsigned *restrict XB, long np,
                      __m512 out[]) {
    __m512 acc[ONE_ROW];
    for (int u = 0; u < ONE_ROW; ++u) acc[u] = _mm512_setzero_ps();
    for (long j = 0; j < np; ++j) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(XB[j]);
        for (int u = 0; u < ONE_ROW; ++u)
            acc[u] = _mm512_dpbf16_ps(acc[u], (__m512bh)_mm512_loadu_si512(W + u * size + j * 2 * PANEL), x);
    }
    for (int u = 0; u < ONE_ROW; ++u) out[u] = acc[u];
}

typedef void (*pairs_fn)(const unsigned short *restrict, const unsigned *restrict, long, long, __m512[]);

/* A row of n floats as (n + 1) / 2 pairs of bf16 numbers (the first in the low half), rounded to
 * nearest even, 32 at a time. */
static void to_bf16_pairs(const float *restrict x, long n, unsigned *restrict xb) {
    long k = 0;
    for (; k + 32 <= n; k += 32)
        _mm512_storeu_si512(xb + k / 2, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + k + 16), _mm512_loadu_ps(x + k)));
    if (k < n) {
        float tail[32] = {0};
        memcpy(tail, x + k, (n - k) * sizeof(float));
        unsigned pairs[16];
        _mm512_storeu_si512(pairs, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(tail + 16), _mm512_loadu_ps(tail)));
        memcpy(xb + k / 2, pairs, (n - k + 1) / 2 * sizeof(unsigned));
    }
}

/* Panels p0 … p1 − 1 of Y (rows, ldy) = act(X Wᵀ + b) for X's rows as bf16 pairs (np per row). */
static void packed_pairs(const void *restrict Wp, const unsigned *restrict XB, long np, const float *restrict b,
                         float *restrict Y, long ldy, long rows, long out, long p0, long p1, int act) {
    static const pairs_fn tiles[9] = {0, pairs_1, pairs_2, pairs_3, pairs_4, pairs_5, pairs_6, pairs_7, pairs_8};
    const long size = 2 * PANEL * np; /* bf16 numbers per panel */
    const unsigned short *W = Wp;
    __m512 acc[MR_MAX];
    vf sums[1][NV];
    if (rows == 1) {
        long p = p0;
        for (; p + ONE_ROW <= p1; p += ONE_ROW) {
            pairs_one(W + p * size, size, XB, np, acc);
            for (int u = 0; u < ONE_ROW; ++u) {
                memcpy(sums[0], &acc[u], sizeof acc[u]);
                store_panel(sums[0], b, Y, (p + u) * PANEL, out, act);
            }
        }
        for (; p < p1; ++p) {
            pairs_1(W + p * size, XB, np, np, acc);
            memcpy(sums[0], &acc[0], sizeof acc[0]);
            store_panel(sums[0], b, Y, p * PANEL, out, act);
        }
        return;
    }
    for (long p = p0; p < p1; ++p)
        for (long m = 0; m < rows;) {
            const long mr = rows - m >= MR_MAX ? MR_MAX : rows - m;
            tiles[mr](W + p * size, XB + m * np, np, np, acc);
            for (long i = 0; i < mr; ++i) {
                memcpy(sums[0], &acc[i], sizeof acc[i]);
                store_panel(sums[0], b, Y + (m + i) * ldy, p * PANEL, out, act);
            }
            m += mr;
        }
}
#endif

#define EXPORT_(isa) attnlab_isa_##isa
#define EXPORT(isa) EXPORT_(isa)

#if defined(DPBF16)
INTERNAL const isa_kernels_t EXPORT(ISA) = {packed, to_bf16_pairs, ONE_ROW};
#else
INTERNAL const isa_kernels_t EXPORT(ISA) = {packed, 0, ONE_ROW};
#endif
