#include "verify.h"

#include "errors.h"
#include "kernels.h"
#include "tree.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace pyaccel {

namespace {

// Below this a running residual sum (weights of order 1 at the top token) is
// recomputed from scratch rather than trusted after repeated subtraction.
constexpr double kResidualRecheck = 1e-6;

// q at one node, read in place from draft_probs: q_i = row[i] / sum, except
// 0 for the tokens of siblings already rejected (drawing without replacement).
struct DraftRow {
    const float * row = nullptr;
    double sum = 1.0;
    std::vector<int32_t> removed;

    float at(int32_t x) const {
        return std::find(removed.begin(), removed.end(), x) != removed.end() ? 0.0f : row[x];
    }
};

// Everything one verification reads, plus its one V-sized buffer.
struct Verifier {
    const RowsView & logits;
    const DraftTreeView & tree;
    const SamplingParams & params;
    Rng & rng;
    const RowsView * q_rows;
    TreeChildren kids;
    SamplingScratch scratch;
    std::vector<float> p;  // target weights: p_i = p[i] / p_sum
    DraftRow q;

    int32_t n_vocab() const { return logits.n_cols; }

    // Children of `node` (-1 = root) as [begin, end) into kids.ids.
    std::pair<const int32_t *, const int32_t *> children(int32_t node) const {
        const int32_t * ids = kids.ids.data();
        return { ids + kids.offsets[node + 1], ids + kids.offsets[node + 2] };
    }
};

std::string row_name(int32_t node) {
    return node < 0 ? "row 0 (after the root)"
                    : "row " + std::to_string(node + 1) + " (after node " + std::to_string(node) + ")";
}

LogitsScan scan_target_row(const Verifier & v, int32_t node) {
    const LogitsScan s = logits_scan(v.logits.row(node + 1), v.n_vocab());
    if (!s.finite) {
        fail("target_logits " + row_name(node) +
             " contains NaN or inf: pass the finite logits the model produced");
    }
    return s;
}

// p <- transformed target distribution at `node`; returns its sum and entropy.
Weights load_target(Verifier & v, int32_t node) {
    const LogitsScan s = scan_target_row(v, node);
    return logits_weights(v.logits.row(node + 1), v.n_vocab(), v.params, s, v.p.data(), v.scratch);
}

void load_draft(Verifier & v, int32_t node) {
    const float * row = v.q_rows->row(node + 1);
    const ProbsCheck c = probs_check(row, v.n_vocab());
    if (!c.entries_ok || std::fabs(c.sum - 1.0) > kProbsSumTolerance) {
        fail("draft_probs " + row_name(node) +
             " is not a probability distribution (finite, >= 0, sums to 1; sum = " +
             kernels::float_str(c.sum) + "): compute it with probs() from the draft logits");
    }
    v.q.row = row;
    v.q.sum = c.sum;
    v.q.removed.clear();
}

PYACCEL_ROW_PASS double residual_mass(const float * p, const float * q, int32_t n, float ps, float qs) {
    double total = 0.0;
    for (int32_t b = 0; b < n; b += kernels::kBlock) {
        const int32_t e = std::min(n, b + kernels::kBlock);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int32_t i = b; i < e; ++i) {
            s += std::max(0.0f, p[i] * ps - q[i] * qs);
        }
        total += s;
    }
    return total;
}

PYACCEL_ROW_PASS void residual_store(float * p, const float * q, int32_t n, float ps, float qs) {
#pragma omp simd
    for (int32_t i = 0; i < n; ++i) {
        p[i] = std::max(0.0f, p[i] * ps - q[i] * qs);
    }
}

// Rejected x with draft q: p <- norm(max(0, p - q)), q <- q without x. The
// mass is summed before p is overwritten, so that a residual with no mass
// left (p == q to float precision) can leave p as it was (see verify.h).
void reject_with_draft(Verifier & v, int32_t x, double & p_sum) {
    DraftRow & q = v.q;
    float * p = v.p.data();
    const float ps = static_cast<float>(1.0 / p_sum);
    const float qs = static_cast<float>(1.0 / q.sum);
    double r_sum = residual_mass(p, q.row, v.n_vocab(), ps, qs);
    std::vector<float> removed_p(q.removed.size());  // q is 0 there, so the residual is p
    for (size_t j = 0; j < q.removed.size(); ++j) {
        const int32_t t = q.removed[j];
        removed_p[j] = p[t] * ps;
        r_sum += removed_p[j] - std::max(0.0f, removed_p[j] - q.row[t] * qs);
    }
    if (r_sum > 0.0) {
        residual_store(p, q.row, v.n_vocab(), ps, qs);
        for (size_t j = 0; j < q.removed.size(); ++j) {
            p[q.removed[j]] = removed_p[j];
        }
        p_sum = r_sum;
    }
    q.sum -= q.row[x];
    q.removed.push_back(x);
}

// Rejected x with a one-hot draft: p(x) <- 0.
void reject_one_hot(Verifier & v, int32_t x, double & p_sum) {
    const float px = v.p[x];
    double rest = p_sum - px;
    if (rest < kResidualRecheck) {
        rest = 0.0;
        for (int32_t i = 0; i < v.n_vocab(); ++i) {
            rest += i == x ? 0.0f : v.p[i];
        }
    }
    if (rest > 0.0) {  // else all mass was on x: keep p (see verify.h)
        v.p[x] = 0.0f;
        p_sum = rest;
    }
}

// One node of the lossless rule. Returns the accepted child, or -1 with the
// emitted token in *next.
int32_t lossless_step(Verifier & v, int32_t node, int32_t * next) {
    double p_sum = load_target(v, node).sum;
    const auto kids = v.children(node);
    if (v.q_rows && kids.first != kids.second) {
        load_draft(v, node);
    }
    for (const int32_t * k = kids.first; k != kids.second; ++k) {
        const int32_t x = v.tree.tokens[*k];
        const double px = v.p[x] / p_sum;
        if (!v.q_rows) {
            if (v.rng.uniform() < px) {
                return *k;
            }
            reject_one_hot(v, x, p_sum);
            continue;
        }
        const float qx = v.q.at(x);
        if (!(qx > 0.0f) || !(v.q.sum > 0.0)) {
            continue;  // q(x) = 0: x cannot have been drawn
        }
        if (v.rng.uniform() * (qx / v.q.sum) < px) {
            return *k;
        }
        reject_with_draft(v, x, p_sum);
    }
    *next = weights_sample(v.p.data(), v.n_vocab(), p_sum, v.rng.uniform());
    return -1;
}

VerifyResult verify_greedy(const Verifier & v) {
    VerifyResult r;
    for (int32_t node = -1;;) {
        const int32_t best = scan_target_row(v, node).argmax;
        const auto kids = v.children(node);
        const int32_t * hit = std::find_if(kids.first, kids.second, [&](int32_t k) { return v.tree.tokens[k] == best; });
        if (hit == kids.second) {
            r.next_token = best;
            return r;
        }
        node = *hit;
        r.accepted.push_back(node);
    }
}

VerifyResult verify_lossless(Verifier & v) {
    VerifyResult r;
    for (int32_t node = -1;;) {
        node = lossless_step(v, node, &r.next_token);
        if (node < 0) {
            return r;
        }
        r.accepted.push_back(node);
    }
}

// Deepest chain of acceptable nodes; a preorder walk with ascending children
// meets equally deep chains in lexicographic order, so the first one wins.
VerifyResult verify_typical(Verifier & v, const TypicalParams & tp) {
    std::vector<std::pair<int32_t, int32_t>> stack{ { -1, 0 } };  // (node, depth)
    int32_t best = -1, best_depth = 0;
    while (!stack.empty()) {
        const auto [node, depth] = stack.back();
        stack.pop_back();
        if (depth > best_depth) {
            best = node;
            best_depth = depth;
        }
        const auto kids = v.children(node);
        if (kids.first == kids.second) {
            continue;
        }
        const Weights w = load_target(v, node);
        const double threshold = std::min<double>(tp.epsilon, tp.delta * std::exp(-w.entropy));
        for (const int32_t * k = kids.second; k != kids.first;) {
            --k;  // reversed pushes pop in ascending order
            if (v.p[v.tree.tokens[*k]] / w.sum > threshold) {
                stack.emplace_back(*k, depth + 1);
            }
        }
    }
    VerifyResult r;
    for (int32_t node = best; node >= 0; node = v.tree.parents[node]) {
        r.accepted.push_back(node);
    }
    std::reverse(r.accepted.begin(), r.accepted.end());
    const Weights w = load_target(v, best);
    r.next_token = weights_sample(v.p.data(), v.n_vocab(), w.sum, v.rng.uniform());
    return r;
}

void validate_shapes(const RowsView & logits, const DraftTreeView & tree, const RowsView * q_rows) {
    const int32_t n = tree.n_nodes;
    tree_validate(tree.parents, n);
    if (logits.n_cols <= 0) {
        fail("target_logits must have n_vocab > 0 columns");
    }
    if (logits.n_rows != n + 1) {
        fail("target_logits must have n + 1 = " + std::to_string(n + 1) +
             " rows (root, then one per node), got " + std::to_string(logits.n_rows));
    }
    if (q_rows && (q_rows->n_rows != n + 1 || q_rows->n_cols != logits.n_cols)) {
        fail("draft_probs must have the shape of target_logits (" + std::to_string(n + 1) +
             ", " + std::to_string(logits.n_cols) + "), got (" +
             std::to_string(q_rows->n_rows) + ", " + std::to_string(q_rows->n_cols) + ")");
    }
    for (int32_t i = 0; i < n; ++i) {
        if (tree.tokens[i] < 0 || tree.tokens[i] >= logits.n_cols) {
            fail("tokens[" + std::to_string(i) + "] = " + std::to_string(tree.tokens[i]) +
                 " is not a token id in [0, n_vocab = " + std::to_string(logits.n_cols) + ")");
        }
    }
}

} // namespace

void typical_params_validate(const TypicalParams & p) {
    if (!(p.epsilon >= 0.0f && p.epsilon <= 1.0f)) {
        fail("epsilon must be in [0, 1], got " + kernels::float_str(p.epsilon));
    }
    if (!(p.delta >= 0.0f) || !std::isfinite(p.delta)) {
        fail("delta must be a finite number >= 0, got " + kernels::float_str(p.delta));
    }
}

VerifyResult tree_verify(const RowsView & logits, const DraftTreeView & tree, const SamplingParams & params, Rng & rng,
                         const RowsView * draft_probs, const TypicalParams * typical) {
    sampling_params_validate(params);
    if (typical) {
        typical_params_validate(*typical);
    }
    validate_shapes(logits, tree, draft_probs);
    Verifier v{ logits, tree, params, rng, draft_probs, tree_children_build(tree.parents, tree.n_nodes), {}, {}, {} };
    VerifyResult r;
    if (params.temperature == 0.0f) {
        r = verify_greedy(v);
    } else {
        v.p.resize(v.n_vocab());
        r = typical ? verify_typical(v, *typical) : verify_lossless(v);
    }
    r.path = tree_path_of(tree.parents, tree.n_nodes, r.accepted.empty() ? -1 : r.accepted.back());
    return r;
}

} // namespace pyaccel
