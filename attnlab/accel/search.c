/* attnlab's search kernels: choosing the next tokens from a step's logits, for greedy decoding and
 * beam search (attnlab.decode), each in one pass over the logits.
 *
 * - attnlab_top_k_log_softmax: the K most likely tokens of each row and their log-probabilities,
 *   without writing the (rows, V) log-probabilities (greedy decoding: K = 1);
 * - attnlab_beam_step: one step of beam search's bookkeeping, the choice of each sentence's K best
 *   extensions among its rows', with the rows they extend and when each hypothesis ended;
 * - attnlab_gather_filled: the key/value caches following the hypotheses they extend, copying only
 *   the positions decoded so far.
 *
 * The numbers of the PyTorch operations they replace up to rounding (tests/accel/test_kernels.py).
 */

#include "common.h"

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
void attnlab_top_k_log_softmax(const float *restrict logits, long rows, long V, long K, float *restrict val,
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
void attnlab_beam_step(const float *restrict logits, long V, long n, long k, long K, const float *restrict scores,
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

/* dst[i, j, :used] = src[index[i], j, :used] for i < rows, j < blocks: the rows of a cache
 * (rows, blocks, block) elements of `size` bytes (blocks: its heads; block: capacity × Dh numbers)
 * gathered as index_select(0, index) would, but only the first `used` numbers of each block (the
 * positions decoded so far), shared out over the threads. The rest of dst is left as it was. */
void attnlab_gather_filled(const void *restrict src, void *restrict dst, const long *restrict index, long rows,
                           long blocks, long block, long used, long size, int threads) {
    const char *s = src;
    char *d = dst;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long ij = 0; ij < rows * blocks; ++ij) {
        const long i = ij / blocks, j = ij - i * blocks;
        memcpy(d + (i * blocks + j) * block * size, s + (index[i] * blocks + j) * block * size, used * size);
    }
}
