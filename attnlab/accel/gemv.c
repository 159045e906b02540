/* attnlab's matrix-vector product for decoding: y = W x + b, fp32, one input row.
 *
 * Generating one token multiplies every weight matrix by a single vector, so the cost is reading
 * the weights from memory once. The loop is the plainest one: the rows are split over the
 * threads in contiguous ranges, and each row is one vectorised dot product. Each thread then
 * reads a single sequential stream, which the hardware prefetcher follows best (a variant that
 * interleaves four rows was slower; docs/foundation.md has the measurements). Built by
 * attnlab/accel/kernels.py with -O3 -march=native.
 *
 * Shapes: W (out, n) row-major and contiguous, x (n,), b (out,) or NULL, y (out,).
 */

void attnlab_gemv_f32(const float *restrict W, const float *restrict x, const float *restrict b,
                      float *restrict y, long out, long n, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long o = 0; o < out; ++o) {
        const float *restrict w = W + o * n;
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (long i = 0; i < n; ++i) acc += w[i] * x[i];
        y[o] = acc + (b ? b[o] : 0.0f);
    }
}
