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
#include <string.h>

/* Eight floats, in whatever vector registers the target has (GCC/Clang vector extensions). */
typedef float f32x8 __attribute__((vector_size(32)));

static inline f32x8 load8(const float *p) {
    f32x8 v;
    memcpy(&v, p, sizeof v); /* an unaligned load */
    return v;
}

/* w . x over n floats. Four independent accumulators: a single one makes every multiply-add wait
 * for the previous one, and a row of a few hundred floats is then bound by that latency rather
 * than by memory. The order of the additions is fixed by the code, the same for every caller. */
static inline float row_dot(const float *restrict w, const float *restrict x, long n) {
    f32x8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    long i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 += load8(w + i) * load8(x + i);
        a1 += load8(w + i + 8) * load8(x + i + 8);
        a2 += load8(w + i + 16) * load8(x + i + 16);
        a3 += load8(w + i + 24) * load8(x + i + 24);
    }
    for (; i + 8 <= n; i += 8) a0 += load8(w + i) * load8(x + i);
    const f32x8 a = (a0 + a1) + (a2 + a3);
    float acc = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    for (; i < n; ++i) acc += w[i] * x[i];
    return acc;
}

/* Y = X Wᵀ + b for one row of X (a decoding step) or a few (beam search over one sentence, one
 * row per hypothesis). For so few rows PyTorch's CPU product takes several times as long as reading
 * the weights (docs/foundation.md has the measurements). Here each weight row is read once and,
 * while it is in the L1 cache, multiplied by every row of X, so the weights stream from memory once
 * whatever the number of rows. Each number is one row_dot, in the same order whatever the number
 * of rows, so a row gives the same bits alone or beside others.
 *
 * Shapes: W (out, n) row-major and contiguous, X (rows, n) contiguous, b (out,) or NULL,
 * Y (rows, out). */
void attnlab_linear_rows_f32(const float *restrict W, const float *restrict X, const float *restrict b,
                             float *restrict Y, long rows, long out, long n, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long o = 0; o < out; ++o) {
        const float *w = W + o * n;
        const float bias = b ? b[o] : 0.0f;
        for (long m = 0; m < rows; ++m) Y[m * out + o] = row_dot(w, X + m * n, n) + bias;
    }
}

/* `count` matrices of one shape times the same rows, their outputs side by side: the query, key
 * and value projections of a decoding step in one parallel region instead of three (each region
 * costs a fork and a barrier, comparable to streaming a small matrix). Each number is the row_dot
 * of attnlab_linear_rows_f32.
 *
 * Shapes: W[m] (out, n) row-major and contiguous for m < count, X (rows, n) contiguous, b NULL or
 * b[m] (out,), Y (rows, count * out) with Y[i][m * out + o] = W[m][o] . X[i] + b[m][o]. */
void attnlab_gemv_many_f32(const float *const *W, const float *restrict X, const float *const *b,
                           float *restrict Y, long rows, long count, long out, long n, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long r = 0; r < count * out; ++r) {
        const long m = r / out, o = r - m * out;
        const float *w = W[m] + o * n;
        const float bias = b ? b[m][o] : 0.0f;
        for (long i = 0; i < rows; ++i) Y[i * count * out + r] = row_dot(w, X + i * n, n) + bias;
    }
}

/* Scaled dot-product attention of a single query per (batch, head) over S keys, the step of
 * incremental decoding (Vaswani et al. 2017, eq. 1): out = softmax(scale * K q) V. One pass over
 * the keys and values with the online softmax (Milakov & Gimelshein 2018): the weighted sum is
 * kept relative to the largest score seen so far and rescaled when a larger one appears, so no
 * exponential overflows and the scores need no buffer. One (batch, head) pair per iteration of
 * the parallel loop.
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
        float *o = out + bh * Dh;
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
}
