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
static void layer_norm_rows(const float *x, float *y, long rows, long D, const float *w, const float *b, float eps) {
#pragma omp for schedule(static)
    for (long i = 0; i < rows; ++i) {
        const float *xi = x + i * D;
        float *yi = y + i * D;
        double mean = 0.0, var = 0.0;
        for (long d = 0; d < D; ++d) mean += xi[d];
        mean /= (double)D;
        for (long d = 0; d < D; ++d) {
            const double t = xi[d] - mean;
            var += t * t;
        }
        const float rstd = 1.0f / sqrtf((float)(var / (double)D) + eps);
        const float m = (float)mean;
        for (long d = 0; d < D; ++d) yi[d] = (xi[d] - m) * rstd * w[d] + (b ? b[d] : 0.0f);
    }
}

/* Y (rows, out) = X (rows, n) Wᵀ + b inside a parallel region (the numbers of
 * attnlab_linear_rows_f32); act 1 applies ReLU, 2 exact GELU (x Φ(x)). */
static void linear_rows(const float *restrict W, const float *restrict X, const float *restrict b, float *restrict Y,
                        long rows, long out, long n, int act) {
#pragma omp for schedule(static)
    for (long o = 0; o < out; ++o) {
        const float *w = W + o * n;
        const float bias = b ? b[o] : 0.0f;
        for (long i = 0; i < rows; ++i) {
            float y = row_dot(w, X + i * n, n) + bias;
            if (act == 1) y = y > 0.0f ? y : 0.0f;
            else if (act == 2) y = 0.5f * y * (1.0f + erff(y * 0.70710678118654752f));
            Y[i * out + o] = y;
        }
    }
}

/* x += t (pre-norm), or x = LayerNorm(x + t) (post-norm). */
static void residual(float *x, const float *t, long rows, long D, int pre, const float *w, const float *b, float eps) {
#pragma omp for schedule(static)
    for (long i = 0; i < rows * D; ++i) x[i] += t[i];
    if (!pre) layer_norm_rows(x, x, rows, D, w, b, eps);
}

/* A sub-layer's input: LayerNorm(x) into h before it (pre-norm), else x itself. */
static const float *sublayer_input(const float *x, float *h, long rows, long D, int pre, const float *w, const float *b,
                                   float eps) {
    if (!pre) return x;
    layer_norm_rows(x, h, rows, D, w, b, eps);
    return h;
}

/* One decoding step of a Transformer decoder layer (Vaswani et al. 2017, §3.1) for `rows` rows,
 * one new target position each: causal self-attention over a key/value cache, source–target
 * attention over the projected source, feed-forward; each with its residual and LayerNorm before
 * (pre-norm) or after (post-norm). The same operations as attnlab's DecoderBlock in one call and
 * one parallel region: a step of a few rows is mostly the fixed cost of each tensor operation, of
 * which this does none.
 *
 * P, the parameters (biases may be NULL): 0-5 the self, cross and feed-forward LayerNorms'
 * weight and bias; 6-13 Wq bq Wk bk Wv bv Wo bo of the self-attention (D, D); 14-17 Wq bq Wo bo of
 * the cross-attention; 18-21 W1 (F, D) b1 W2 (D, F) b2 of the feed-forward.
 * x (rows, D): the residual stream, updated in place. Kc, Vc (rows, H, cap, Dh): the cache, whose
 * first L positions are filled; position L is written here. Km, Vm (rows / groups, H, S, Dh): the
 * projected source; row i attends to the first lengths[i / groups] positions of row i / groups.
 * scratch: rows * (4 D + F) floats. act: 1 ReLU, 2 GELU. */
void attnlab_decoder_layer_f32(const float *const *P, float *restrict x, float *restrict Kc, float *restrict Vc,
                               const float *restrict Km, const float *restrict Vm, const long *restrict lengths,
                               float *restrict scratch, long rows, long D, long H, long F, long cap, long L, long S,
                               long groups, int pre, int act, float eps, int threads) {
    const long Dh = D / H;
    const float scale = 1.0f / sqrtf((float)Dh);
    float *h = scratch, *q = h + rows * D, *ctx = q + rows * D, *t = ctx + rows * D, *f = t + rows * D;
#pragma omp parallel num_threads(threads)
    {
        /* self-attention */
        const float *in = sublayer_input(x, h, rows, D, pre, P[0], P[1], eps);
#pragma omp for schedule(static)
        for (long o = 0; o < 3 * D; ++o) {
            const long m = o / D, oo = o - m * D;
            const float *w = P[6 + 2 * m] + oo * D, *bias = P[7 + 2 * m];
            for (long i = 0; i < rows; ++i) {
                const float y = row_dot(w, in + i * D, D) + (bias ? bias[oo] : 0.0f);
                if (m == 0) q[i * D + oo] = y;
                else {
                    const long head = oo / Dh, d = oo - head * Dh;
                    (m == 1 ? Kc : Vc)[((i * H + head) * cap + L) * Dh + d] = y;
                }
            }
        }
#pragma omp for schedule(static)
        for (long bh = 0; bh < rows * H; ++bh) {
            const long i = bh / H, head = bh - i * H;
            const long base = (i * H + head) * cap * Dh;
            attend_row(q + i * D + head * Dh, Kc + base, Vc + base, L + 1, Dh, scale, ctx + i * D + head * Dh);
        }
        linear_rows(P[12], ctx, P[13], t, rows, D, D, 0);
        residual(x, t, rows, D, pre, P[0], P[1], eps);
        /* source–target attention */
        in = sublayer_input(x, h, rows, D, pre, P[2], P[3], eps);
        linear_rows(P[14], in, P[15], q, rows, D, D, 0);
#pragma omp for schedule(static)
        for (long bh = 0; bh < rows * H; ++bh) {
            const long i = bh / H, head = bh - i * H, src = i / groups;
            const long base = (src * H + head) * S * Dh;
            attend_row(q + i * D + head * Dh, Km + base, Vm + base, lengths[src], Dh, scale, ctx + i * D + head * Dh);
        }
        linear_rows(P[16], ctx, P[17], t, rows, D, D, 0);
        residual(x, t, rows, D, pre, P[2], P[3], eps);
        /* feed-forward */
        in = sublayer_input(x, h, rows, D, pre, P[4], P[5], eps);
        linear_rows(P[18], in, P[19], f, rows, F, D, act);
        linear_rows(P[20], f, P[21], t, rows, D, F, 0);
        residual(x, t, rows, D, pre, P[4], P[5], eps);
    }
}
