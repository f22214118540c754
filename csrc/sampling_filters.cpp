#include "sampling_filters.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace pyaccel {
namespace filters {

namespace {

// Top-p buckets tokens by their logit gap below the max, kTopPBucketsPerNat
// buckets per unit of logit, up to a gap of kTopPBuckets / kTopPBucketsPerNat
// = 32; one more bucket takes the rest. A token 32 below the max weighs
// e^-32 ~ 1e-14 of the top one, so for any top_p < 1 in float the cut falls
// inside the first kTopPBuckets and only the tokens of one narrow bucket are
// ever sorted.
constexpr int32_t kTopPBuckets = 128;
constexpr float   kTopPBucketsPerNat = 4.0f;

struct ByLogitDesc {
    const float * x;
    bool operator()(int32_t a, int32_t b) const {
        return x[a] > x[b] || (x[a] == x[b] && a < b);
    }
};

int32_t gap_bucket(float m, float x) {
    const float g = std::min((m - x) * kTopPBucketsPerNat, static_cast<float>(kTopPBuckets));
    return static_cast<int32_t>(g);
}

template <typename F>
void for_each_in_set(bool all, int32_t n, const std::vector<int32_t> & ids, F f) {
    if (all) {
        for (int32_t i = 0; i < n; ++i) {
            f(i);
        }
    } else {
        for (const int32_t i : ids) {
            f(i);
        }
    }
}

} // namespace

// One pass keeping a candidate buffer of at most 2k + 64 ids: whenever it
// fills, it is cut back to its k best, and the worst of those becomes the bar
// a later id must beat (strictly: a later id loses a tie on its larger id).
// Every cut discards as many ids as it keeps, so the pass is O(n) overall.
void keep_top_k(const float * x, int32_t n, int32_t k, std::vector<int32_t> & ids) {
    const ByLogitDesc better{ x };
    const size_t cap = 2 * static_cast<size_t>(k) + 64;
    auto cut = [&]() {
        std::nth_element(ids.begin(), ids.begin() + (k - 1), ids.end(), better);
        ids.resize(k);
    };
    ids.clear();
    float bar = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < n; ++i) {
        if (!(x[i] > bar)) {
            continue;
        }
        ids.push_back(i);
        if (ids.size() == cap) {
            cut();
            bar = x[ids[k - 1]];
        }
    }
    if (ids.size() > static_cast<size_t>(k)) {
        cut();
    }
}

// Buckets are ordered by rank (a lower bucket holds strictly larger logits),
// so every bucket before the one where the cumulative mass reaches the target
// is kept whole, and only that bucket needs sorting to place the cut.
void keep_top_p(const float * x, int32_t n, const float * unit, double unit_total, float m, float top_p, bool all,
                std::vector<int32_t> & ids, std::vector<int32_t> & tmp) {
    std::array<double, kTopPBuckets + 1> mass{};
    for_each_in_set(all, n, ids, [&](int32_t i) { mass[gap_bucket(m, x[i])] += unit[i]; });
    const double target = static_cast<double>(top_p) * unit_total;
    double before = 0.0;
    int32_t cut_bucket = 0;
    while (cut_bucket < kTopPBuckets && before + mass[cut_bucket] < target) {
        before += mass[cut_bucket++];
    }
    tmp.clear();
    size_t n_keep = 0;  // in place over ids: never passes the read position
    auto place = [&](int32_t i) {
        const int32_t b = gap_bucket(m, x[i]);
        if (b < cut_bucket) {
            if (all) {
                ids.push_back(i);
            } else {
                ids[n_keep++] = i;
            }
        } else if (b == cut_bucket) {
            tmp.push_back(i);
        }
    };
    if (all) {
        ids.clear();
        for (int32_t i = 0; i < n; ++i) {
            place(i);
        }
    } else {
        for (const int32_t i : ids) {
            place(i);
        }
        ids.resize(n_keep);
    }
    std::sort(tmp.begin(), tmp.end(), ByLogitDesc{ x });
    double cum = before;
    for (const int32_t i : tmp) {
        ids.push_back(i);
        cum += unit[i];
        if (cum >= target) {
            break;
        }
    }
}

void keep_min_p(const float * x, int32_t n, float m, float min_p, bool all, std::vector<int32_t> & ids) {
    const float floor_logit = m + std::log(min_p);
    if (all) {
        ids.clear();
        for (int32_t i = 0; i < n; ++i) {
            if (x[i] >= floor_logit) {
                ids.push_back(i);
            }
        }
        return;
    }
    ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int32_t i) { return x[i] < floor_logit; }), ids.end());
}

} // namespace filters
} // namespace pyaccel
