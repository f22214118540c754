#pragma once

// Device cost model: how much to draft and verify on THIS device.
//
// Every method proposes, the target verifies b tokens in one decode, and the step commits
// 1 + (accepted draft tokens). Whether a draft pays depends on what b tokens cost here:
// on a small CPU one decode of 2 tokens costs far more than one of 1, on a GPU about the
// same. So the
// sizes come from a measured curve, never from a fixed constant.
//
// Costs are relative wall times in any unit (only ratios matter). Speedups are relative to
// plain decoding: (tokens per unit time of the plan) / (1 / t[1]).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pyaccel {

// Two plans whose speedups differ by less than this relative amount are a tie; ties go to
// the smaller draft: it wastes less compute for the same speed, and float rounding must
// not decide between equal plans.
constexpr double kPlanTieTolerance = 1e-9;

// Measured relative wall time of one target decode of b tokens.
//
// Measured curves are NOT monotone: CPU kernels tile, so the curve has plateaus and steps
// (docs/design.md's reference curve is flat from 12 to 16 tokens) and noise can make
// t[b+1] < t[b].
// Nothing here assumes monotonicity.
class CostCurve {
public:
    // times: times[b-1] = cost of b tokens for b = 1..B, B >= 1; each finite and > 0.
    explicit CostCurve(std::vector<double> times);

    // Benchmarks measure a few sizes; the sizes in between are linearly interpolated.
    // sizes: strictly increasing, sizes[0] == 1. times: one finite cost > 0 per size.
    static CostCurve from_points(const std::vector<int32_t> & sizes,
                                 const std::vector<double> & times);

    // b >= 1. Beyond the last measured size B: linear extrapolation from t[B-1], t[B] with
    // the slope clamped at >= 0 (more tokens never cost less); with B == 1, b * t[1]
    // (compute-bound: the pessimistic guess).
    double cost_at(int32_t b) const;

    int32_t measured() const { return static_cast<int32_t>(times_.size()); }
    const std::vector<double> & times() const { return times_; }

    // The verification sizes b <= max_b worth considering, ascending: b is dominated when
    // some b' in (b, max_b] costs no more (t[b'] <= t[b]), because verifying b' tokens then
    // commits at least as many tokens for at most the same time. What remains is the last
    // size of each plateau or step: the sizes where cost strictly rises afterwards.
    // Padding a smaller draft up to b' is no use (padding is never accepted); the point is
    // to draft b'-1 tokens instead. chain_plan / tree_plan need no filtering: with any
    // acceptance > 0 their exact argmax never lands on a dominated size (and with
    // acceptance 0 the tie rule keeps the smaller one). This helper is for callers that
    // fix shapes ahead of time (tree templates, lookahead windows). max_b >= 1.
    std::vector<int32_t> efficient_sizes(int32_t max_b) const;

private:
    std::vector<double> times_;
};

struct ChainPlan {
    int32_t best_len        = 0;    // draft tokens to propose; 0 = decode plainly
    double expected_tokens  = 1.0;  // E(best_len): tokens committed per step
    double expected_cost    = 0.0;  // t[best_len + 1] + draft cost
    double expected_speedup = 1.0;  // vs plain decoding; 1.0 when best_len == 0
};

// Best chain draft length.
// alpha: n_alpha >= max_len values in [0, 1]; alpha[i-1] = P(draft token i accepted | tokens
//   before it accepted), as measured by AcceptanceStats.
// draft_cost_per_token: >= 0, cost of drafting one token relative to ONE target decode of
//   one token (t[1] = 1 units); 0 for n-gram drafts.
// max_len: >= 0, the longest draft the proposer can make.
// E(k) = 1 + sum_{i<=k} prod_{j<=i} alpha_j; cost(k) = t[k+1] + k * draft_cost * t[1];
// speedup(k) = E(k) / cost(k) * t[1]. Returns the argmax over k in 0..max_len.
ChainPlan chain_plan(const CostCurve & curve, const double * alpha, size_t n_alpha,
                     double draft_cost_per_token, int32_t max_len);

struct TreePlan {
    std::vector<int32_t> nodes;    // chosen node indices, ascending (original order)
    std::vector<int32_t> parents;  // parents of the chosen nodes, re-indexed into `nodes`
    double expected_tokens  = 1.0; // 1 + sum of the chosen nodes' path probabilities
    double expected_cost    = 0.0; // t[m + 1], m = nodes.size()
    double expected_speedup = 1.0;
};

// Best prefix-closed subset of a drafted candidate tree (Sequoia / EAGLE-2 style). The
// tree is already drafted, so its draft cost is sunk and not counted.
// path_prob: n values in [0, 1]; the probability that node i is accepted = the product of
//   the conditional acceptances along its root path.
// parents: n values, -1 for a child of the root, else an index < i.
// max_nodes: >= 0, the most draft nodes to verify.
// For each m, takes the m nodes of largest path probability whose parents are taken
// (ties to the smaller index) — optimal when a child is never likelier than its parent,
// which holds for products of conditionals — and picks m maximising
// (1 + sum of path probs) / t[m + 1]. m = 0 (empty plan) unless some m beats plain decoding.
TreePlan tree_plan(const CostCurve & curve, const double * path_prob, const int32_t * parents,
                   size_t n, int32_t max_nodes);

// Per-position acceptance estimates, tracked online.
//
// Position i (0-based) is "tried" in a step when the draft had > i tokens and all tokens
// before i were accepted; it is "accepted" when the verifier kept it. alpha[i] estimates
// P(accepted | tried): the per-position conditional chain_plan needs. Each position keeps
// an exponentially decayed count (decayed when that position gets a new sample, so rarely
// reached positions keep their evidence instead of fading back to the prior), plus a prior
// so the first steps draft sensibly.
class AcceptanceStats {
public:
    static constexpr double kDefaultDecay       = 0.95;  // ~20 recent samples per position
    static constexpr double kDefaultPriorAlpha  = 0.5;
    static constexpr double kDefaultPriorWeight = 2.0;   // worth two observations

    // n_positions: >= 1, draft positions tracked (deeper ones are ignored).
    // decay: in (0, 1]; 1 = plain counts. prior_alpha: in [0, 1]. prior_weight: >= 0;
    // prior_weight == 0 needs every position observed before alpha() is meaningful
    // (unobserved positions then report prior_alpha).
    explicit AcceptanceStats(int32_t n_positions, double decay = kDefaultDecay,
                             double prior_alpha = kDefaultPriorAlpha,
                             double prior_weight = kDefaultPriorWeight);
    // A prior rate per position: prior_alphas[i] in [0, 1], one per position (>= 1 of them).
    AcceptanceStats(std::vector<double> prior_alphas, double decay, double prior_weight);

    // One verification step: n_drafted >= 0 tokens proposed, the first n_accepted of them
    // (0 <= n_accepted <= n_drafted) accepted.
    void observe(int32_t n_drafted, int32_t n_accepted);

    // One position's outcome, for drafts whose tokens are checked one at a time as the real
    // tokens arrive (shadow drafts). position >= 0; positions >= n_positions() are ignored.
    // The caller only reports position i once positions < i were accepted.
    void observe_position(int32_t position, bool accepted);

    // alpha[i] = (accepted[i] + prior_alpha[i] * prior_weight) / (tried[i] + prior_weight).
    std::vector<double> alpha() const;
    // alpha()[position] alone; 0 <= position < n_positions() (else std::invalid_argument).
    double alpha_at(int32_t position) const;

    int32_t n_positions() const { return static_cast<int32_t>(tried_.size()); }

private:
    double decay_, prior_weight_;
    std::vector<double> prior_, tried_, accepted_;
};

}  // namespace pyaccel
