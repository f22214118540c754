// Sampling transforms over one row of logits: argmax, the transformed
// distribution p = probs(logits, params), and draws from it.
//
// The transform is llama-cpp-python's default sampler chain (Llama._init_sampler
// with no penalties, no grammar, typical_p = 1, no mirostat), in its order:
//
//     top_k -> top_p -> min_p -> temperature -> softmax
//
//   top_k  keep the k largest logits (0 or >= n_vocab: off).
//   top_p  softmax at temperature 1 over the kept set, sort descending, keep the
//          shortest prefix whose mass is >= top_p (1: off; keeps >= 1 token).
//   min_p  keep logits >= max_logit + log(min_p), i.e. p_i >= min_p * p_max at
//          temperature 1 (0: off).
//   temperature  softmax(logit / temperature) over the kept set; everything
//          else is exactly 0. temperature == 0 is greedy: one-hot at argmax.
//
// Because top_p and min_p see temperature-1 probabilities, a given (params,
// logits) pair yields the same distribution here as in llama.cpp, and plain
// sampling with pyaccel draws from what llama-cpp-python would. Ties in
// top_k / top_p ordering go to the lower token id. The same function serves the
// target p and the draft q: lossless verification needs both transformed alike.
//
// All functions are pure over raw pointers; n_vocab is the row length (> 0).
// Non-finite logits (NaN, +-inf) are caller errors: llama.cpp masks nothing
// with -inf in the rows pyaccel reads, so one means a broken model or buffer.
#pragma once

#include "rng.h"

#include <cstdint>
#include <vector>

namespace pyaccel {

struct SamplingParams {
    float   temperature = 0.0f;  // >= 0 and finite; 0 = greedy
    int32_t top_k       = 0;     // >= 0; 0 = off
    float   top_p       = 1.0f;  // in (0, 1]; 1 = off
    float   min_p       = 0.0f;  // in [0, 1]; 0 = off
};

// Throws std::invalid_argument naming the bad field and its legal range.
void sampling_params_validate(const SamplingParams & params);

// One pass over a row: its maximum, the lowest id holding it, and whether
// every entry is finite (max / argmax are meaningless when finite is false).
struct LogitsScan {
    float   max;
    int32_t argmax;
    bool    finite;
};

LogitsScan logits_scan(const float * logits, int32_t n_vocab);

// Lowest token id among the largest logits. Throws std::invalid_argument on a
// non-finite entry or n_vocab <= 0.
int32_t logits_argmax(const float * logits, int32_t n_vocab);

// Buffers reused across rows so that a verification pass allocates its
// O(n_vocab) memory once, not once per node.
struct SamplingScratch {
    std::vector<int32_t> ids;      // kept token ids while filters run
    std::vector<int32_t> ids_tmp;  // top-p candidates
    std::vector<float>   weights;  // one row of unnormalised p
};

// Unnormalised transformed distribution: out[i] = p_i * sum.
struct Weights {
    double sum;      // > 0
    double entropy;  // of p, in nats (0 for greedy)
};

// logits: n_vocab finite floats. params: valid (see sampling_params_validate).
// out: n_vocab floats, fully overwritten with weights (0 outside the kept set).
// Returns their sum and p's entropy. Does not check finiteness: callers scan
// the row first (logits_scan) and pass its result in `scan`.
Weights logits_weights(const float * logits, int32_t n_vocab, const SamplingParams & params,
                       const LogitsScan & scan, float * out, SamplingScratch & scratch);

// Normalised transformed distribution into out (n_vocab floats, sums to 1).
// Throws std::invalid_argument on non-finite logits or invalid params.
void logits_probs(const float * logits, int32_t n_vocab, const SamplingParams & params,
                  float * out, SamplingScratch & scratch);

// Inverse-CDF draw from weights w (n >= 1, non-negative, sum `total` > 0 with
// at least one positive entry), u in [0, 1). Never returns a zero-weight id.
int32_t weights_sample(const float * w, int32_t n, double total, double u);

// temperature == 0: argmax, no random number used. Otherwise one uniform from
// rng and an inverse-CDF draw from probs(). Throws as logits_probs.
int32_t logits_sample(const float * logits, int32_t n_vocab, const SamplingParams & params,
                      Rng & rng, SamplingScratch & scratch);

// Tolerance on |sum(p) - 1| for distributions handed in by callers (draft
// rows, sample_probs): loose enough for float32 sums over 150k entries, tight
// enough to catch logits or unnormalised counts passed by mistake.
constexpr double kProbsSumTolerance = 1e-3;

struct ProbsCheck {
    bool   entries_ok;  // every entry finite and >= 0
    double sum;
};

ProbsCheck probs_check(const float * p, int32_t n);

// Draw from a caller-normalised distribution p (n entries). Throws
// std::invalid_argument if p has negative / non-finite entries or does not
// sum to 1 within kProbsSumTolerance.
int32_t probs_sample(const float * p, int32_t n, Rng & rng);

} // namespace pyaccel
