#include "calibration.h"

#include "errors.h"
#include "tree_merge.h"

#include <algorithm>

namespace pyaccel {
namespace {

void check_row(int32_t row, int32_t n_rows, const char * what) {
    if (row < 0 || row >= n_rows) {
        fail(what, ": table row ", row, " outside [0, ", n_rows, ")");
    }
}

double rescaled(const BandTable & t, double p, int32_t row) {
    return std::min(1.0, p * t.table[static_cast<size_t>(row) * (t.n_edges + 1) + calibration_band(t, p)]);
}

} // namespace

int32_t calibration_band(const BandTable & t, double p) {
    return static_cast<int32_t>(std::upper_bound(t.edges, t.edges + t.n_edges, p) - t.edges);
}

std::vector<double> calibrate(const BandTable & t, const double * probs, const int32_t * rows,
                              const uint8_t * keep, int32_t n) {
    if (n > 0 && (probs == nullptr || rows == nullptr || keep == nullptr)) {
        fail("calibrate: null arrays for ", n, " estimates");
    }
    std::vector<double> out(probs, probs + std::max(0, n));
    for (int32_t i = 0; i < n; ++i) {
        if (!keep[i]) {
            check_row(rows[i], t.n_rows, "calibrate");
            out[i] = rescaled(t, probs[i], rows[i]);
        }
    }
    return out;
}

std::vector<double> calibrate_tree(const BandTable & t, const double * path_probs, const int32_t * parents,
                                   const int32_t * owner, const uint8_t * learnt, int32_t n,
                                   const int32_t * source_rows, int32_t n_sources) {
    std::vector<double> probs(path_probs, path_probs + std::max(0, n));  // tree_cap validates parents
    for (int32_t i = 0; i < n; ++i) {
        if (learnt[i]) {
            continue;
        }
        if (owner[i] < 0 || owner[i] >= n_sources) {
            fail("calibrate_tree: node ", i, " has owner ", owner[i], " outside [0, ", n_sources, ")");
        }
        const int32_t row = source_rows[owner[i]];
        check_row(row, t.n_rows, "calibrate_tree");
        probs[i] = rescaled(t, path_probs[i], row);
    }
    return tree_cap(parents, probs.data(), n);
}

void calibration_record(const BandTable & bands, Record & record, const double * path_probs,
                        const double * held, const uint8_t * held_learnt, int32_t n_nodes, int32_t n_sources,
                        const int32_t * source_rows, const int64_t * verified, int32_t n_verified,
                        const int64_t * accepted, int32_t n_accepted, double scale) {
    std::vector<uint8_t> kept(static_cast<size_t>(std::max(0, n_nodes)), 0);
    for (int32_t k = 0; k < n_accepted; ++k) {
        if (accepted[k] < 0 || accepted[k] >= n_nodes) {
            fail("calibration_record: accepted node ", accepted[k], " outside [0, ", n_nodes, ")");
        }
        kept[static_cast<size_t>(accepted[k])] = 1;
    }
    for (int32_t s = 0; s < n_sources; ++s) {
        check_row(source_rows[s], record.n_rows, "calibration_record");
    }
    const int32_t n_bands = bands.n_edges + 1;
    for (int32_t k = 0; k < n_verified; ++k) {
        const int64_t v = verified[k];
        if (v < 0 || v >= n_nodes) {
            fail("calibration_record: verified node ", v, " outside [0, ", n_nodes, ")");
        }
        for (int32_t s = 0; s < n_sources; ++s) {
            const size_t at = static_cast<size_t>(v) * n_sources + s;
            if (held[at] < 0.0 || held_learnt[at]) {
                continue;
            }
            const double p = std::min(held[at], path_probs[v]);
            const size_t cell = static_cast<size_t>(source_rows[s]) * n_bands + calibration_band(bands, p);
            record.predicted[cell] += p / scale;
            record.accepted[cell] += (kept[static_cast<size_t>(v)] ? 1.0 : 0.0) / scale;
        }
    }
}

} // namespace pyaccel
