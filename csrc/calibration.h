// auto's calibration of acceptance estimates: a table of accepted-over-predicted ratios
// per (row, band of estimate) rescales estimates, and verified tree nodes are added to
// the record the table is computed from. Trees are described as in tree.h; estimates
// are P(node accepted), not conditional on the parent.
//
// Bands: edges[0..n_edges) increasing; an estimate p falls in band b = the number of
// edges <= p (0 .. n_edges), so a record or table row has n_edges + 1 bands. Tables
// and records are row-major, n_rows x (n_edges + 1).
#pragma once

#include <cstdint>
#include <vector>

namespace pyaccel {

// The edges of the bands and a table of factors over them (views, not owned).
struct BandTable {
    const double * edges = nullptr;
    int32_t n_edges = 0;
    const double * table = nullptr;  // n_rows x (n_edges + 1)
    int32_t n_rows = 0;
};

// The band of estimate p: the number of edges <= p.
int32_t calibration_band(const BandTable & t, double p);

// Estimates rescaled: out[i] = probs[i] where keep[i], else
// min(1, probs[i] * table[rows[i]][band(probs[i])]). Throws std::invalid_argument on a
// row outside [0, n_rows) or null arrays with n > 0.
std::vector<double> calibrate(const BandTable & t, const double * probs, const int32_t * rows,
                              const uint8_t * keep, int32_t n);

// A merged tree's estimates made ready to plan with: node i (owned by source owner[i],
// whose table row is source_rows[owner[i]]) rescaled as by `calibrate` unless learnt[i],
// then tree_cap (no node above its parent, siblings within their parent). parents:
// n entries, validated; owner[i] in [0, n_sources).
std::vector<double> calibrate_tree(const BandTable & t, const double * path_probs, const int32_t * parents,
                                   const int32_t * owner, const uint8_t * learnt, int32_t n,
                                   const int32_t * source_rows, int32_t n_sources);

// A record of predicted and accepted nodes per (row, band), n_rows x n_bands, row-major
// (views, written in place).
struct Record {
    double * predicted = nullptr;
    double * accepted = nullptr;
    int32_t n_rows = 0;
};

// Verified nodes of a merged tree added to the record, each count divided by `scale`
// (the record's stored units). For each verified node v, in the order given, and each
// source s in [0, n_sources) whose estimate held[v][s] (n_nodes x n_sources) is >= 0 and
// not held_learnt[v][s]: p = min(held[v][s], path_probs[v]) is added to
// predicted[source_rows[s]][band(p)] and, where v is one of `accepted`, 1 to accepted there.
// Verified and accepted are node ids in [0, n_nodes). Throws std::invalid_argument on
// ids or rows out of range.
void calibration_record(const BandTable & bands, Record & record, const double * path_probs,
                        const double * held, const uint8_t * held_learnt, int32_t n_nodes, int32_t n_sources,
                        const int32_t * source_rows, const int64_t * verified, int32_t n_verified,
                        const int64_t * accepted, int32_t n_accepted, double scale);

} // namespace pyaccel
