#include "cost.h"

#include "errors.h"
#include "tree.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <utility>

namespace pyaccel {

namespace {

void check_positive(const std::vector<double> & times, const char * what) {
    if (times.empty()) fail(what, " is empty: measure at least the 1-token decode");
    for (size_t i = 0; i < times.size(); ++i) {
        if (!std::isfinite(times[i]) || times[i] <= 0.0) {
            fail(what, "[", i, "] = ", times[i], ": costs must be finite and > 0");
        }
    }
}

void check_probabilities(const double * p, size_t n, const char * what) {
    for (size_t i = 0; i < n; ++i) {
        if (!(p[i] >= 0.0 && p[i] <= 1.0)) {
            fail(what, "[", i, "] = ", p[i], ": probabilities must lie in [0, 1]");
        }
    }
}

bool beats(double speedup, double best) { return speedup > best * (1.0 + kPlanTieTolerance); }

}  // namespace

// ---------------------------------------------------------------------------------------
// CostCurve
// ---------------------------------------------------------------------------------------

CostCurve::CostCurve(std::vector<double> times) : times_(std::move(times)) {
    check_positive(times_, "times");
}

CostCurve CostCurve::from_points(const std::vector<int32_t> & sizes,
                                 const std::vector<double> & times) {
    if (sizes.size() != times.size()) {
        fail("from_points: ", sizes.size(), " sizes but ", times.size(),
             " times: pass one time per size");
    }
    check_positive(times, "times");
    if (sizes[0] != 1) fail("from_points: sizes[0] = ", sizes[0], ": measure b = 1 first");
    std::vector<double> dense{times[0]};
    for (size_t i = 1; i < sizes.size(); ++i) {
        if (sizes[i] <= sizes[i - 1]) fail("from_points: sizes must be strictly increasing");
        const double step = (times[i] - times[i - 1]) / (sizes[i] - sizes[i - 1]);
        for (int32_t b = sizes[i - 1] + 1; b <= sizes[i]; ++b) {
            dense.push_back(times[i - 1] + step * (b - sizes[i - 1]));
        }
    }
    return CostCurve(std::move(dense));
}

double CostCurve::cost_at(int32_t b) const {
    if (b < 1) fail("cost_at(", b, "): b is a token count, >= 1");
    const int32_t n = measured();
    if (b <= n) return times_[b - 1];
    if (n == 1) return times_[0] * b;
    const double slope = std::max(0.0, times_[n - 1] - times_[n - 2]);
    return times_[n - 1] + slope * (b - n);
}

std::vector<int32_t> CostCurve::efficient_sizes(int32_t max_b) const {
    if (max_b < 1) fail("efficient_sizes(", max_b, "): max_b must be >= 1");
    std::vector<int32_t> sizes;
    double cheapest_after = INFINITY;  // min over b' in (b, max_b] of t[b']
    for (int32_t b = max_b; b >= 1; --b) {
        const double t = cost_at(b);
        if (t < cheapest_after) sizes.push_back(b);
        cheapest_after = std::min(cheapest_after, t);
    }
    std::reverse(sizes.begin(), sizes.end());
    return sizes;
}

// ---------------------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------------------

ChainPlan chain_plan(const CostCurve & curve, const double * alpha, size_t n_alpha,
                     double draft_cost_per_token, int32_t max_len) {
    if (max_len < 0) fail("chain_plan: max_len = ", max_len, " must be >= 0");
    if (n_alpha < static_cast<size_t>(max_len)) {
        fail("chain_plan: alpha has ", n_alpha, " positions but max_len is ", max_len,
             ": pass max_len <= len(alpha) or track more positions");
    }
    check_probabilities(alpha, static_cast<size_t>(max_len), "alpha");
    if (!(draft_cost_per_token >= 0.0) || !std::isfinite(draft_cost_per_token)) {
        fail("chain_plan: draft_cost_per_token = ", draft_cost_per_token,
             " must be finite and >= 0");
    }
    const double t1 = curve.cost_at(1);
    ChainPlan best{0, 1.0, t1, 1.0};
    double expected = 1.0, p_all = 1.0;  // E(k); P(first k all accepted)
    for (int32_t k = 1; k <= max_len; ++k) {
        p_all *= alpha[k - 1];
        expected += p_all;
        const double cost = curve.cost_at(k + 1) + k * draft_cost_per_token * t1;
        const double speedup = expected / cost * t1;
        if (beats(speedup, best.expected_speedup)) best = ChainPlan{k, expected, cost, speedup};
    }
    return best;
}

namespace {

// Node order of the greedy tree: largest path probability among the nodes whose parent is
// already taken; ties to the smaller index. Returns at most max_nodes indices.
std::vector<int32_t> greedy_order(const double * path_prob, const int32_t * parents, size_t n,
                                  size_t max_nodes) {
    std::vector<std::vector<int32_t>> children(n);
    using Entry = std::pair<double, int32_t>;  // (prob, -index): max-heap order
    std::priority_queue<Entry> frontier;
    for (size_t i = 0; i < n; ++i) {
        if (parents[i] < 0) {
            frontier.emplace(path_prob[i], -static_cast<int32_t>(i));
        } else {
            children[parents[i]].push_back(static_cast<int32_t>(i));
        }
    }
    std::vector<int32_t> order;
    while (!frontier.empty() && order.size() < max_nodes) {
        const int32_t node = -frontier.top().second;
        frontier.pop();
        order.push_back(node);
        for (int32_t c : children[node]) frontier.emplace(path_prob[c], -c);
    }
    return order;
}

}  // namespace

TreePlan tree_plan(const CostCurve & curve, const double * path_prob, const int32_t * parents,
                   size_t n, int32_t max_nodes) {
    if (max_nodes < 0) fail("tree_plan: max_nodes = ", max_nodes, " must be >= 0");
    check_probabilities(path_prob, n, "path_prob");
    tree_validate(parents, static_cast<int32_t>(n));
    const std::vector<int32_t> order =
        greedy_order(path_prob, parents, n, static_cast<size_t>(max_nodes));
    const double t1 = curve.cost_at(1);
    TreePlan plan;
    plan.expected_cost = t1;
    size_t best_m = 0;
    double sum = 0.0;
    for (size_t m = 1; m <= order.size(); ++m) {
        sum += path_prob[order[m - 1]];
        const double cost = curve.cost_at(static_cast<int32_t>(m) + 1);
        const double speedup = (1.0 + sum) / cost * t1;
        if (beats(speedup, plan.expected_speedup)) {
            best_m = m;
            plan.expected_tokens = 1.0 + sum;
            plan.expected_cost = cost;
            plan.expected_speedup = speedup;
        }
    }
    plan.nodes.assign(order.begin(), order.begin() + best_m);
    std::sort(plan.nodes.begin(), plan.nodes.end());
    // Prefix-closed and ascending, so every parent is already re-indexed.
    std::vector<int32_t> new_index(n, -1);
    for (size_t j = 0; j < plan.nodes.size(); ++j) {
        const int32_t node = plan.nodes[j];
        new_index[node] = static_cast<int32_t>(j);
        plan.parents.push_back(parents[node] < 0 ? -1 : new_index[parents[node]]);
    }
    return plan;
}

// ---------------------------------------------------------------------------------------
// AcceptanceStats
// ---------------------------------------------------------------------------------------

AcceptanceStats::AcceptanceStats(int32_t n_positions, double decay, double prior_alpha,
                                 double prior_weight)
    : AcceptanceStats(std::vector<double>(static_cast<size_t>(std::max(n_positions, 0)), prior_alpha),
                      decay, prior_weight) {}

AcceptanceStats::AcceptanceStats(std::vector<double> prior_alphas, double decay, double prior_weight)
    : decay_(decay), prior_weight_(prior_weight), prior_(std::move(prior_alphas)) {
    if (prior_.empty()) fail("AcceptanceStats: n_positions = 0 must be >= 1");
    if (!(decay > 0.0 && decay <= 1.0)) {
        fail("AcceptanceStats: decay = ", decay, " must lie in (0, 1]");
    }
    for (size_t i = 0; i < prior_.size(); ++i) {
        if (!(prior_[i] >= 0.0 && prior_[i] <= 1.0)) {
            fail("AcceptanceStats: prior_alpha[", i, "] = ", prior_[i], " must lie in [0, 1]");
        }
    }
    if (!(prior_weight >= 0.0) || !std::isfinite(prior_weight)) {
        fail("AcceptanceStats: prior_weight = ", prior_weight, " must be finite and >= 0");
    }
    tried_.assign(prior_.size(), 0.0);
    accepted_.assign(prior_.size(), 0.0);
}

void AcceptanceStats::observe(int32_t n_drafted, int32_t n_accepted) {
    if (n_drafted < 0 || n_accepted < 0 || n_accepted > n_drafted) {
        fail("observe(n_drafted=", n_drafted, ", n_accepted=", n_accepted,
             "): need 0 <= n_accepted <= n_drafted");
    }
    // Positions 0..n_accepted were tried (the one after the accepted run is the rejection).
    // In 64 bits: n_accepted + 1 overflows int32 when n_accepted == INT32_MAX.
    const int32_t n_tried = static_cast<int32_t>(
        std::min<int64_t>({n_drafted, int64_t{n_accepted} + 1, n_positions()}));
    for (int32_t i = 0; i < n_tried; ++i) observe_position(i, i < n_accepted);
}

void AcceptanceStats::observe_position(int32_t position, bool accepted) {
    if (position < 0) fail("observe_position(position=", position, "): need position >= 0");
    if (position >= n_positions()) return;
    tried_[position] = tried_[position] * decay_ + 1.0;
    accepted_[position] = accepted_[position] * decay_ + (accepted ? 1.0 : 0.0);
}

std::vector<double> AcceptanceStats::alpha() const {
    std::vector<double> out(tried_.size());
    for (size_t i = 0; i < tried_.size(); ++i) {
        out[i] = alpha_at(static_cast<int32_t>(i));
    }
    return out;
}

double AcceptanceStats::alpha_at(int32_t position) const {
    if (position < 0 || position >= n_positions()) {
        fail("alpha_at(", position, "): position must be in [0, ", n_positions(), ")");
    }
    const size_t i = static_cast<size_t>(position);
    const double denom = tried_[i] + prior_weight_;
    return denom > 0.0 ? (accepted_[i] + prior_[i] * prior_weight_) / denom : prior_[i];
}

}  // namespace pyaccel
