// Internal: the truncation steps of the sampler chain (see sampling.h). Each
// narrows a set of kept token ids, held in no particular order, using the
// total order "higher logit first, then lower id" wherever ranks matter.
#pragma once

#include <cstdint>
#include <vector>

namespace pyaccel {
namespace filters {

// ids <- the k best of the n ids 0 .. n-1. x: n finite logits; 1 <= k < n.
void keep_top_k(const float * x, int32_t n, int32_t k, std::vector<int32_t> & ids);

// The top-p and min-p steps take the current set as either all n ids
// (all == true, ids ignored: nothing vocabulary-sized is materialised) or the
// ids in `ids`; they leave the result in `ids`.

// ids <- the shortest prefix, in rank order, of the set whose temperature-1
// mass reaches top_p of the set's mass. x: n logits, m: max over the set,
// unit[i] = exp(x[i] - m) for every i in the set, unit_total = their sum,
// 0 < top_p < 1. tmp: scratch.
void keep_top_p(const float * x, int32_t n, const float * unit, double unit_total, float m, float top_p, bool all,
                std::vector<int32_t> & ids, std::vector<int32_t> & tmp);

// ids <- those of the set with x[i] >= m + log(min_p), i.e. temperature-1
// probability at least min_p times the top token's. m: max over the set;
// 0 < min_p <= 1.
void keep_min_p(const float * x, int32_t n, float m, float min_p, bool all, std::vector<int32_t> & ids);

} // namespace filters
} // namespace pyaccel
