/* attnlab's Transformer layers in C: the decoder's step (translators and GPT) and the encoder, each
 * a whole pass in one call and one parallel region.
 *
 * At a few rows a decoding step is mostly the fixed cost of each tensor operation (~100 per step),
 * of which these do none; their matrix products are products.c's over weights packed once. The
 * layers' parameters arrive as layout.py's structures (decoder_layer_t, encoder_layer_t), the calls'
 * arguments as decoder_step_t and encoder_t. The numbers are those of attnlab's modules
 * (DecoderBlock, EncoderBlock) up to rounding, tested against them in tests/accel/test_native_paths.py.
 */

#include "common.h"

#include <stdlib.h>

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
    float acc = hsum8((a0 + a1) + (a2 + a3));
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

/* ---- the pieces of a layer, inside a parallel region -------------------------------------------- */

/* LayerNorm of a row of D floats (Ba et al. 2016), as torch.nn.LayerNorm: mean and biased variance,
 * y = (x - mean) / sqrt(var + eps) * w + b. y may be x. */
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

/* The feed-forward sub-layer (§3.3) with its residual: LayerNorm (norm_w, norm_b), W1 b1, the
 * activation, W2 b2. f: rows · F floats of working memory. */
static void feed_forward(const float *norm_w, const float *norm_b, weight_t w1, const float *b1, weight_t w2,
                         const float *b2, float *restrict x, float *restrict h, float *restrict t, float *restrict f,
                         long rows, long D, long F, int pre, int act, float eps) {
    const float *in = sublayer_input(x, h, rows, D, pre, norm_w, norm_b, eps);
    packed_rows(w1, in, D, b1, f, F, rows, F, D, act);
    packed_rows(w2, f, F, b2, t, D, rows, D, F, ACT_NONE);
    residual(x, t, rows, D, pre, norm_w, norm_b, eps);
}

/* ---- the decoder --------------------------------------------------------------------------------- */

/* Scratch floats of decoder_layer for `rows` rows. */
#define DECODER_SCRATCH(rows, D, F) ((rows) * (6 * (D) + (F)))

/* One decoding step of a Transformer decoder layer (Vaswani et al. 2017, §3.1) for `rows` rows,
 * one new target position each: causal self-attention over a key/value cache, source–target
 * attention over the projected source, feed-forward; each with its residual and LayerNorm before
 * (pre-norm) or after (post-norm). The operations of attnlab's DecoderBlock.
 *
 * x (rows, D): the residual stream, updated in place. Kc, Vc (rows, H, cap, Dh): the cache, whose
 * first L positions are filled; position L is written here. Km, Vm (rows / groups, H, S, Dh): the
 * projected source; row i attends to the first lengths[i / groups] positions of row i / groups
 * (Km NULL: no source, the layer of a decoder-only model such as GPT). scratch: DECODER_SCRATCH
 * floats. */
static void decoder_layer(const decoder_layer_t *P, const decoder_step_t *a, float *restrict Kc, float *restrict Vc,
                          const float *restrict Km, const float *restrict Vm) {
    const long rows = a->rows, D = a->D, H = a->H, cap = a->cap, L = a->L, S = a->S, groups = a->groups;
    const long Dh = D / H;
    const int pre = a->pre;
    const float eps = a->eps, scale = 1.0f / sqrtf((float)Dh);
    float *x = a->x, *h = a->scratch, *qkv = h + rows * D, *ctx = qkv + rows * 3 * D, *t = ctx + rows * D;
    float *f = t + rows * D;
    const weight_t W[3] = {P->self_wq, P->self_wk, P->self_wv};
    const float *b[3] = {P->self_bq, P->self_bk, P->self_bv};
    /* self-attention: the new position's query, key and value; the key and value into the cache */
    const float *in = sublayer_input(x, h, rows, D, pre, P->self_norm_w, P->self_norm_b, eps);
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
    packed_rows(P->self_wo, ctx, D, P->self_bo, t, D, rows, D, D, ACT_NONE);
    residual(x, t, rows, D, pre, P->self_norm_w, P->self_norm_b, eps);
    if (Km) { /* source–target attention (none in a decoder-only model) */
        in = sublayer_input(x, h, rows, D, pre, P->cross_norm_w, P->cross_norm_b, eps);
        packed_rows(P->cross_wq, in, D, P->cross_bq, qkv, D, rows, D, D, ACT_NONE);
        SHARE
        for (long bh = 0; bh < rows * H; ++bh) {
            const long i = bh / H, head = bh - i * H, src = i / groups;
            const long base = (src * H + head) * S * Dh;
            attend_row(qkv + i * D + head * Dh, Km + base, Vm + base, a->lengths[src], Dh, scale,
                       ctx + i * D + head * Dh);
        }
        team_sync();
        packed_rows(P->cross_wo, ctx, D, P->cross_bo, t, D, rows, D, D, ACT_NONE);
        residual(x, t, rows, D, pre, P->cross_norm_w, P->cross_norm_b, eps);
    }
    feed_forward(P->ff_norm_w, P->ff_norm_b, P->ff_w1, P->ff_b1, P->ff_w2, P->ff_b2, x, h, t, f, rows, D, a->F, pre,
                 a->act, eps);
}

/* A whole decoding step of a Transformer decoder in one call and one parallel region: the new
 * tokens' embeddings at position L, every layer (decoder_layer), the final LayerNorm of a pre-norm
 * stack (final_w NULL: none) and the projection to the vocabulary.
 *
 * tokens (rows,); table (V, D); pe (positions, D). Kc[l], Vc[l] and Km[l], Vm[l] per layer, as
 * decoder_layer (Km NULL: a decoder-only model). out_w (V, D) packed, out_b (V,) or NULL; logits
 * (rows, V): the output. x: rows · D floats of working memory; scratch: DECODER_SCRATCH floats. */
void attnlab_decoder_step(const decoder_step_t *a) {
    team_t team = {.products = &a->products, .pairs = pairs_for(&a->products, a->rows, a->F > a->D ? a->F : a->D)};
#pragma omp parallel num_threads(a->products.threads)
    {
        team_enter(&team);
        embed_rows(a->table, a->tokens, a->L, a->pe, a->embed_scale, a->x, a->rows, a->D);
        for (long l = 0; l < a->n_layers; ++l)
            decoder_layer(a->layers + l, a, a->Kc[l], a->Vc[l], a->Km ? a->Km[l] : 0, a->Vm ? a->Vm[l] : 0);
        if (a->final_w) layer_norm_rows(a->x, a->x, a->rows, a->D, a->final_w, a->final_b, a->eps);
        packed_rows(a->out_w, a->x, a->D, a->out_b, a->logits, a->V, a->rows, a->V, a->D, ACT_NONE);
    }
    free(team.pairs);
}

/* ---- the encoder --------------------------------------------------------------------------------- */

/* Scratch floats of encoder_layer for `rows` rows. */
#define ENCODER_SCRATCH(rows, D, F) ((rows) * (8 * (D) + (F)))

/* One Transformer encoder layer (§3.1) over B right-padded sentences of S positions: self-attention
 * of every position over the first lengths[b] positions of its sentence (the padding is never
 * attended to), then the feed-forward; pre- or post-norm. The operations of attnlab's EncoderBlock
 * with a key-padding mask. a->x (B·S, D) updated in place; a->scratch: ENCODER_SCRATCH floats. */
static void encoder_layer(const encoder_layer_t *P, const encoder_t *a) {
    const long B = a->B, S = a->S, D = a->D, H = a->H, rows = B * S, Dh = D / H;
    const int pre = a->pre;
    const float eps = a->eps, scale = 1.0f / sqrtf((float)Dh);
    float *x = a->x, *h = a->scratch, *qkv = h + rows * D, *k = qkv + rows * 3 * D, *v = k + rows * D;
    float *ctx = v + rows * D, *t = ctx + rows * D, *f = t + rows * D;
    const weight_t W[3] = {P->wq, P->wk, P->wv};
    const float *b[3] = {P->bq, P->bk, P->bv};
    const float *in = sublayer_input(x, h, rows, D, pre, P->attn_norm_w, P->attn_norm_b, eps);
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
        attend_row(qkv + r * 3 * D + head * Dh, k + base, v + base, a->lengths[bb], Dh, scale, ctx + r * D + head * Dh);
    }
    team_sync();
    packed_rows(P->wo, ctx, D, P->bo, t, D, rows, D, D, ACT_NONE);
    residual(x, t, rows, D, pre, P->attn_norm_w, P->attn_norm_b, eps);
    feed_forward(P->ff_norm_w, P->ff_norm_b, P->ff_w1, P->ff_b1, P->ff_w2, P->ff_b2, x, h, t, f, rows, D, a->F, pre,
                 a->act, eps);
}

/* The encoder of a translator and its hand-over to the decoder in one call and one parallel
 * region, for a batch small enough that the fixed cost of each tensor operation is most of the
 * work: the source embeddings, every encoder layer (encoder_layer), the final LayerNorm of a
 * pre-norm stack (final_w NULL: none), and each decoder layer's source keys and values (its
 * cross-attention's Wk, Wv; the decoder computes them once per sentence, not per step).
 *
 * src (B, S) right-padded, lengths (B,) its real tokens; cross: n_cross decoder layers' Wk bk Wv bv;
 * Km[l], Vm[l] (B, H, S, Dh): the outputs. x: B·S·D floats of working memory (the encoder's output
 * on return); scratch: ENCODER_SCRATCH floats. */
void attnlab_encoder(const encoder_t *a) {
    const long B = a->B, S = a->S, D = a->D, H = a->H, rows = B * S, Dh = D / H;
    float *x = a->x, *scratch = a->scratch;
    team_t team = {.products = &a->products, .pairs = pairs_for(&a->products, rows, a->F > D ? a->F : D)};
#pragma omp parallel num_threads(a->products.threads)
    {
        team_enter(&team);
        SHARE
        for (long r = 0; r < rows; ++r) {
            const float *e = a->table + a->src[r] * D, *p = a->pe + (r % S) * D;
            for (long d = 0; d < D; ++d) x[r * D + d] = e[d] * a->embed_scale + p[d];
        }
        team_sync();
        for (long l = 0; l < a->n_layers; ++l) encoder_layer(a->layers + l, a);
        if (a->final_w) layer_norm_rows(x, x, rows, D, a->final_w, a->final_b, a->eps);
        for (long l = 0; l < a->n_cross; ++l) {
            const cross_kv_t *c = a->cross + l;
            const weight_t W[2] = {c->wk, c->wv};
            const float *b[2] = {c->bk, c->bv};
            packed_many(W, b[0] || b[1] ? b : 0, x, D, scratch, rows, 2, D, D);
            SHARE
            for (long r = 0; r < rows; ++r) {
                const long bb = r / S, s = r - bb * S;
                for (long head = 0; head < H; ++head) {
                    const long at = ((bb * H + head) * S + s) * Dh;
                    memcpy(a->Km[l] + at, scratch + r * 2 * D + head * Dh, Dh * sizeof(float));
                    memcpy(a->Vm[l] + at, scratch + r * 2 * D + D + head * Dh, Dh * sizeof(float));
                }
            }
            team_sync();
        }
    }
    free(team.pairs);
}
