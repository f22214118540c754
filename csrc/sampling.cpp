#include "sampling.h"

#include "errors.h"
#include "kernels.h"
#include "sampling_filters.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace pyaccel {

namespace {

using kernels::exp_nonpos;
using kernels::kBlock;
using kernels::kExpFloor;
using kernels::nonfinite_bit;

// 1/temperature, capped so that (logit - max) * inv_t never forms 0 * inf.
float inverse_temperature(float temperature) {
    return static_cast<float>(std::min(1.0 / temperature, 1e30));
}

Weights weights_finish(double sum, double sum_wz) {
    return Weights{ sum, std::log(sum) - sum_wz / sum };
}

// Two reductions per block (sum w, sum w * z), blocks accumulated in double.
PYACCEL_ROW_PASS Weights dense_weights(const float * x, int32_t n, float m, float inv_t, float * out) {
    double sum = 0.0, sum_wz = 0.0;
    for (int32_t b = 0; b < n; b += kBlock) {
        const int32_t e = std::min(n, b + kBlock);
        float s = 0.0f, s_wz = 0.0f;
#pragma omp simd reduction(+ : s, s_wz)
        for (int32_t i = b; i < e; ++i) {
            const float z = std::max((x[i] - m) * inv_t, kExpFloor - 1.0f);
            const float w = exp_nonpos(z);
            out[i] = w;
            s += w;
            s_wz += w * z;
        }
        sum += s;
        sum_wz += s_wz;
    }
    return weights_finish(sum, sum_wz);
}

Weights sparse_weights(const float * x, const std::vector<int32_t> & ids, int32_t n, float m,
                       float inv_t, float * out) {
    std::fill(out, out + n, 0.0f);
    double sum = 0.0, sum_wz = 0.0;
    for (const int32_t i : ids) {
        const float z = std::max((x[i] - m) * inv_t, kExpFloor - 1.0f);
        const float w = exp_nonpos(z);
        out[i] = w;
        sum += w;
        sum_wz += w * z;
    }
    return weights_finish(sum, sum_wz);
}

PYACCEL_ROW_PASS void scale_inplace(float * x, int32_t n, float factor) {
#pragma omp simd
    for (int32_t i = 0; i < n; ++i) {
        x[i] *= factor;
    }
}

void check_vocab(int32_t n_vocab) {
    if (n_vocab <= 0) {
        fail("logits must not be empty: pass one float per vocabulary token");
    }
}

LogitsScan scan_checked(const float * logits, int32_t n_vocab) {
    check_vocab(n_vocab);
    const LogitsScan scan = logits_scan(logits, n_vocab);
    if (!scan.finite) {
        fail("logits contain NaN or inf: pass the finite logits the model produced");
    }
    return scan;
}

} // namespace

void sampling_params_validate(const SamplingParams & p) {
    if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
        fail("temperature must be a finite number >= 0 (0 = greedy), got " + kernels::float_str(p.temperature));
    }
    if (p.top_k < 0) {
        fail("top_k must be >= 0 (0 = off), got " + std::to_string(p.top_k));
    }
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
        fail("top_p must be in (0, 1] (1 = off), got " + kernels::float_str(p.top_p));
    }
    if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
        fail("min_p must be in [0, 1] (0 = off), got " + kernels::float_str(p.min_p));
    }
}

PYACCEL_ROW_PASS LogitsScan logits_scan(const float * x, int32_t n) {
    float best = -std::numeric_limits<float>::infinity();
    int32_t best_block = 0;
    uint32_t bad = 0;
    for (int32_t b = 0; b < n; b += kBlock) {
        const int32_t e = std::min(n, b + kBlock);
        float m = -std::numeric_limits<float>::infinity();
        uint32_t nf = 0;
#pragma omp simd reduction(max : m) reduction(| : nf)
        for (int32_t i = b; i < e; ++i) {
            m = x[i] > m ? x[i] : m;  // this form (not std::max) vectorises as a max reduction
            nf |= nonfinite_bit(x[i]);
        }
        bad |= nf;
        if (m > best) {  // strict: an equal max in a later block loses the tie
            best = m;
            best_block = b;
        }
    }
    if (bad || n <= 0) {
        return LogitsScan{ 0.0f, 0, false };
    }
    int32_t arg = best_block;
    while (x[arg] != best) {
        ++arg;
    }
    return LogitsScan{ best, arg, true };
}

int32_t logits_argmax(const float * logits, int32_t n_vocab) {
    return scan_checked(logits, n_vocab).argmax;
}

Weights logits_weights(const float * x, int32_t n, const SamplingParams & params, const LogitsScan & scan,
                       float * out, SamplingScratch & s) {
    if (params.temperature == 0.0f) {
        std::fill(out, out + n, 0.0f);
        out[scan.argmax] = 1.0f;
        return Weights{ 1.0, 0.0 };
    }
    const float inv_t = inverse_temperature(params.temperature);
    const bool use_k = params.top_k > 0 && params.top_k < n;
    const bool use_p = params.top_p < 1.0f;
    const bool use_min_p = params.min_p > 0.0f;
    if (!use_k && !use_p && !use_min_p) {
        return dense_weights(x, n, scan.max, inv_t, out);
    }
    // out doubles as the temperature-1 weights top-p ranks by; it is
    // overwritten with the final weights last.
    if (use_k) {
        filters::keep_top_k(x, n, params.top_k, s.ids);
    }
    if (use_p) {
        const double unit_total = use_k ? sparse_weights(x, s.ids, n, scan.max, 1.0f, out).sum
                                        : dense_weights(x, n, scan.max, 1.0f, out).sum;
        filters::keep_top_p(x, n, out, unit_total, scan.max, params.top_p, !use_k, s.ids, s.ids_tmp);
    }
    if (use_min_p) {
        filters::keep_min_p(x, n, scan.max, params.min_p, !use_k && !use_p, s.ids);
    }
    return sparse_weights(x, s.ids, n, scan.max, inv_t, out);
}

void logits_probs(const float * logits, int32_t n_vocab, const SamplingParams & params, float * out,
                  SamplingScratch & scratch) {
    sampling_params_validate(params);
    const LogitsScan scan = scan_checked(logits, n_vocab);
    const Weights w = logits_weights(logits, n_vocab, params, scan, out, scratch);
    scale_inplace(out, n_vocab, static_cast<float>(1.0 / w.sum));
}

PYACCEL_ROW_PASS int32_t weights_sample(const float * w, int32_t n, double total, double u) {
    const double target = u * total;
    double acc = 0.0;
    for (int32_t b = 0; b < n; b += kBlock) {
        const int32_t e = std::min(n, b + kBlock);
        float block = 0.0f;
#pragma omp simd reduction(+ : block)
        for (int32_t i = b; i < e; ++i) {
            block += w[i];
        }
        if (acc + block <= target) {
            acc += block;
            continue;
        }
        // acc crosses target inside this block: only a positive w[i] can do it.
        for (int32_t i = b; i < e; ++i) {
            acc += w[i];
            if (acc > target) {
                return i;
            }
        }
    }
    // Rounding left target at or past the summed mass: the last positive entry.
    for (int32_t i = n - 1; i >= 0; --i) {
        if (w[i] > 0.0f) {
            return i;
        }
    }
    throw std::logic_error("weights_sample: no positive weight");
}

int32_t logits_sample(const float * logits, int32_t n_vocab, const SamplingParams & params, Rng & rng,
                      SamplingScratch & scratch) {
    sampling_params_validate(params);
    const LogitsScan scan = scan_checked(logits, n_vocab);
    if (params.temperature == 0.0f) {
        return scan.argmax;
    }
    scratch.weights.resize(n_vocab);
    const Weights w = logits_weights(logits, n_vocab, params, scan, scratch.weights.data(), scratch);
    return weights_sample(scratch.weights.data(), n_vocab, w.sum, rng.uniform());
}

PYACCEL_ROW_PASS ProbsCheck probs_check(const float * p, int32_t n) {
    double sum = 0.0;
    uint32_t bad = 0;
    for (int32_t b = 0; b < n; b += kBlock) {
        const int32_t e = std::min(n, b + kBlock);
        float s = 0.0f;
#pragma omp simd reduction(+ : s) reduction(| : bad)
        for (int32_t i = b; i < e; ++i) {
            bad |= nonfinite_bit(p[i]) | static_cast<uint32_t>(p[i] < 0.0f);
            s += p[i];
        }
        sum += s;
    }
    return ProbsCheck{ bad == 0, sum };
}

int32_t probs_sample(const float * p, int32_t n, Rng & rng) {
    if (n <= 0) {
        fail("p must not be empty: pass one probability per vocabulary token");
    }
    const ProbsCheck c = probs_check(p, n);
    if (!c.entries_ok || std::fabs(c.sum - 1.0) > kProbsSumTolerance) {
        fail("p must be a probability distribution (finite, >= 0, sums to 1); got sum " + kernels::float_str(c.sum) +
             ": normalise it, or pass logits to sample() instead");
    }
    return weights_sample(p, n, c.sum, rng.uniform());
}

} // namespace pyaccel
