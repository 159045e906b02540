/* attnlab's matrix-vector product for decoding: y = W x + b, fp32, one input row.
 *
 * Generating one token multiplies every weight matrix by a single vector, so the cost is reading
 * the weights from memory once. The loop is the plainest one: the rows are split over the
 * threads in contiguous ranges, and each row is one vectorised dot product. Each thread then
 * reads a single sequential stream, which the hardware prefetcher follows best (a variant that
 * interleaves four rows was slower; docs/foundation.md has the measurements). Built by
 * attnlab/accel/kernels.py with -O3 -march=native.
 */

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

/* y = W x + b. Shapes: W (out, n) row-major and contiguous, x (n,), b (out,) or NULL, y (out,). */
void attnlab_gemv_f32(const float *restrict W, const float *restrict x, const float *restrict b,
                      float *restrict y, long out, long n, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long o = 0; o < out; ++o) y[o] = row_dot(W + o * n, x, n) + (b ? b[o] : 0.0f);
}
