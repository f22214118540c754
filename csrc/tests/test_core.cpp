// Tests of the pure C++ core (no pybind11): exact cases, a small statistical
// check, and fuzzed inputs that must either throw std::invalid_argument or
// return a well-formed result. Built and run under ASan/UBSan by
// run_sanitizers.sh; exits non-zero on the first failed check.
#include "calibration.h"
#include "rng.h"
#include "sampling.h"
#include "tree.h"
#include "tree_merge.h"
#include "verify.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

using namespace pyaccel;

namespace {

int g_checks = 0;

#define CHECK(cond)                                                              \
    do {                                                                         \
        ++g_checks;                                                              \
        if (!(cond)) {                                                           \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            std::exit(1);                                                        \
        }                                                                        \
    } while (0)

bool throws_invalid(const std::function<void()> & f) {
    try {
        f();
    } catch (const std::invalid_argument &) {
        return true;
    }
    return false;
}

std::vector<float> normal_row(Rng & rng, int32_t n, float scale) {
    std::vector<float> x(n);
    for (auto & v : x) {  // Box-Muller
        const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
        v = static_cast<float>(scale * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }
    return x;
}

void test_rng() {
    Rng a(42), b(42), c(43);
    for (int i = 0; i < 100; ++i) {
        const double u = a.uniform();
        CHECK(u >= 0.0 && u < 1.0);
        CHECK(u == b.uniform());
    }
    CHECK(a.uniform() != c.uniform());
    const auto state = a.get_state();
    const double next = a.uniform();
    Rng d(0);
    d.set_state(state.data(), static_cast<int64_t>(state.size()));
    CHECK(d.uniform() == next);
    const std::vector<uint8_t> zeros(32, 0);
    CHECK(throws_invalid([&] { d.set_state(zeros.data(), 32); }));
    CHECK(throws_invalid([&] { d.set_state(zeros.data(), 31); }));
}

void test_argmax_and_probs() {
    const std::vector<float> ties{ 0.0f, 3.0f, 1.0f, 3.0f };
    CHECK(logits_argmax(ties.data(), 4) == 1);
    std::vector<float> big(5000, 0.0f);
    big[4999] = 1.0f;
    big[1500] = 1.0f;
    CHECK(logits_argmax(big.data(), 5000) == 1500);
    const std::vector<float> nan_row{ 0.0f, std::numeric_limits<float>::quiet_NaN() };
    CHECK(throws_invalid([&] { logits_argmax(nan_row.data(), 2); }));
    CHECK(throws_invalid([&] { logits_argmax(ties.data(), 0); }));

    SamplingScratch scratch;
    std::vector<float> p(4);
    SamplingParams hot;
    hot.temperature = 1.0f;
    logits_probs(ties.data(), 4, hot, p.data(), scratch);
    CHECK(std::fabs(p[0] + p[1] + p[2] + p[3] - 1.0f) < 1e-6f);
    CHECK(p[1] == p[3] && p[1] > p[2] && p[2] > p[0]);
    SamplingParams k1 = hot;
    k1.top_k = 1;
    logits_probs(ties.data(), 4, k1, p.data(), scratch);
    CHECK(p[1] == 1.0f && p[0] == 0.0f && p[2] == 0.0f && p[3] == 0.0f);
    logits_probs(ties.data(), 4, SamplingParams{}, p.data(), scratch);
    CHECK(p[1] == 1.0f && p[3] == 0.0f);

    SamplingParams bad = hot;
    bad.top_p = 0.0f;
    CHECK(throws_invalid([&] { sampling_params_validate(bad); }));
    bad = hot;
    bad.temperature = -1.0f;
    CHECK(throws_invalid([&] { sampling_params_validate(bad); }));
}

void test_large_vocab_filters() {
    Rng rng(7);
    const int32_t n = 151936;
    const std::vector<float> x = normal_row(rng, n, 3.0f);
    std::vector<float> p(n);
    SamplingScratch scratch;
    const SamplingParams cases[] = { { 0.8f, 40, 0.95f, 0.05f }, { 1.0f, 0, 0.9f, 0.0f }, { 1.0f, 0, 1.0f, 0.3f },
                                     { 0.5f, 1000, 1.0f, 0.0f }, { 2.0f, 0, 1e-6f, 0.0f } };
    for (const SamplingParams & params : cases) {
        logits_probs(x.data(), n, params, p.data(), scratch);
        double sum = 0.0;
        int32_t kept = 0;
        for (const float v : p) {
            CHECK(v >= 0.0f);
            sum += v;
            kept += v > 0.0f;
        }
        CHECK(std::fabs(sum - 1.0) < 1e-5);
        CHECK(params.top_k == 0 || kept <= params.top_k);
        const int32_t s = logits_sample(x.data(), n, params, rng, scratch);
        CHECK(p[s] > 0.0f);
    }
}

void test_weights_sample_edges() {
    const std::vector<float> w{ 0.0f, 2.0f, 0.0f, 1.0f, 0.0f };
    CHECK(weights_sample(w.data(), 5, 3.0, 0.0) == 1);
    CHECK(weights_sample(w.data(), 5, 3.0, 0.6) == 1);
    CHECK(weights_sample(w.data(), 5, 3.0, 0.7) == 3);
    CHECK(weights_sample(w.data(), 5, 3.0001, 0.99999999) == 3);  // rounding past the end
}

void test_tree_layout() {
    const std::vector<int32_t> parents{ -1, -1, 0, 0, 2 };
    const TreeLayout t = tree_layout_build(parents.data(), 5);
    CHECK((t.depth == std::vector<int32_t>{ 1, 1, 2, 2, 3 }));
    CHECK(t.n_paths() == 3);
    CHECK((t.paths[2] == std::vector<int32_t>{ 0, 2, 4 }));
    CHECK((t.node_seqs[0] == std::vector<int32_t>{ 1, 2 }));
    const TreeLayout empty = tree_layout_build(nullptr, 0);
    CHECK(empty.n_paths() == 1 && empty.paths[0].empty());
    const std::vector<int32_t> bad{ -1, 1 };
    CHECK(throws_invalid([&] { tree_layout_build(bad.data(), 2); }));
    const TreeChildren c = tree_children_build(parents.data(), 5);
    CHECK((c.offsets == std::vector<int32_t>{ 0, 2, 4, 4, 5, 5, 5 }));
    CHECK((c.ids == std::vector<int32_t>{ 0, 1, 2, 3, 4 }));
}

std::vector<int32_t> random_parents(Rng & rng, int32_t n) {
    std::vector<int32_t> parents(n);
    for (int32_t i = 0; i < n; ++i) {
        parents[i] = static_cast<int32_t>(rng.uniform() * (i + 1)) - 1;
    }
    return parents;
}

void test_path_of_matches_layout() {
    Rng rng(3);
    for (int trial = 0; trial < 200; ++trial) {
        const int32_t n = 1 + static_cast<int32_t>(rng.uniform() * 40);
        const std::vector<int32_t> parents = random_parents(rng, n);
        const TreeLayout t = tree_layout_build(parents.data(), n);
        for (int32_t node = 0; node < n; ++node) {
            CHECK(tree_path_of(parents.data(), n, node) == t.node_seqs[node].front());
        }
    }
}

void test_verify_greedy_chain() {
    const int32_t v = 6;
    std::vector<float> logits(4 * v, 0.0f);
    const int32_t argmaxes[] = { 2, 4, 1, 5 };
    for (int32_t r = 0; r < 4; ++r) {
        logits[r * v + argmaxes[r]] = 5.0f;
    }
    const std::vector<int32_t> tokens{ 2, 4, 3 }, parents{ -1, 0, 1 };
    Rng rng(0);
    const VerifyResult r = tree_verify(RowsView{ logits.data(), 4, v }, DraftTreeView{ tokens.data(), parents.data(), 3 },
                                       SamplingParams{}, rng, nullptr, nullptr);
    CHECK((r.accepted == std::vector<int32_t>{ 0, 1 }));
    CHECK(r.next_token == 1 && r.path == 0);
}

// Chain of one node with draft q: the first emitted token must follow p.
void test_verify_chain_marginal() {
    const int32_t v = 4;
    const std::vector<float> target{ 1.0f, 0.0f, -1.0f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f };
    std::vector<float> draft(2 * v);
    SamplingScratch scratch;
    SamplingParams hot;
    hot.temperature = 1.0f;
    const std::vector<float> draft_logits{ -1.0f, 0.5f, 1.0f, 0.0f };
    logits_probs(draft_logits.data(), v, hot, draft.data(), scratch);
    logits_probs(draft_logits.data(), v, hot, draft.data() + v, scratch);
    std::vector<float> p(v);
    logits_probs(target.data(), v, hot, p.data(), scratch);
    Rng rng(11);
    const int n_trials = 200000;
    std::vector<int> counts(v, 0);
    const std::vector<int32_t> parents{ -1 };
    const RowsView q_view{ draft.data(), 2, v };
    for (int t = 0; t < n_trials; ++t) {
        const std::vector<int32_t> tokens{ probs_sample(draft.data(), v, rng) };
        const VerifyResult r = tree_verify(RowsView{ target.data(), 2, v }, DraftTreeView{ tokens.data(), parents.data(), 1 },
                                           hot, rng, &q_view, nullptr);
        ++counts[r.accepted.empty() ? r.next_token : tokens[0]];
    }
    for (int32_t i = 0; i < v; ++i) {
        CHECK(std::fabs(counts[i] / static_cast<double>(n_trials) - p[i]) < 0.006);  // ~6 sigma
    }
}

// Fuzz: any input either throws std::invalid_argument or yields a result whose
// accepted nodes form a root path, with a valid token and path index.
void fuzz_verify(int n_cases) {
    Rng rng(2024);
    SamplingScratch scratch;
    int n_thrown = 0;
    for (int c = 0; c < n_cases; ++c) {
        const int32_t v = 1 + static_cast<int32_t>(rng.uniform() * (rng.uniform() < 0.1 ? 3000 : 40));
        const int32_t n = static_cast<int32_t>(rng.uniform() * 30);
        std::vector<int32_t> parents = random_parents(rng, n), tokens(n);
        for (auto & t : tokens) {
            t = static_cast<int32_t>(rng.uniform() * v);
        }
        if (n > 0 && rng.uniform() < 0.05) {
            parents[static_cast<size_t>(rng.uniform() * n)] = n + 3;
        }
        if (n > 0 && rng.uniform() < 0.05) {
            tokens[static_cast<size_t>(rng.uniform() * n)] = rng.uniform() < 0.5 ? -1 : v;
        }
        std::vector<float> logits = normal_row(rng, (n + 1) * v, 2.0f);
        if (rng.uniform() < 0.05) {
            logits[static_cast<size_t>(rng.uniform() * logits.size())] =
                rng.uniform() < 0.5 ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
        }
        const SamplingParams params{ rng.uniform() < 0.3 ? 0.0f : static_cast<float>(0.05 + 2.0 * rng.uniform()),
                                     rng.uniform() < 0.5 ? 0 : static_cast<int32_t>(rng.uniform() * 10),
                                     rng.uniform() < 0.5 ? 1.0f : static_cast<float>(0.01 + 0.98 * rng.uniform()),
                                     rng.uniform() < 0.5 ? 0.0f : static_cast<float>(rng.uniform()) };
        std::vector<float> draft((n + 1) * v);
        for (int32_t r = 0; r <= n; ++r) {
            const std::vector<float> dl = normal_row(rng, v, 1.0f);
            logits_probs(dl.data(), v, params, draft.data() + r * v, scratch);
        }
        if (rng.uniform() < 0.05) {
            draft[static_cast<size_t>(rng.uniform() * draft.size())] = -0.5f;
        }
        const RowsView q{ draft.data(), n + 1, v };
        const TypicalParams typical;
        const bool use_q = rng.uniform() < 0.5, use_typical = rng.uniform() < 0.2;
        try {
            const VerifyResult r = tree_verify(RowsView{ logits.data(), n + 1, v },
                                               DraftTreeView{ tokens.data(), parents.data(), n }, params, rng,
                                               use_q ? &q : nullptr, use_typical ? &typical : nullptr);
            CHECK(r.next_token >= 0 && r.next_token < v);
            int32_t prev = -1;
            for (const int32_t a : r.accepted) {
                CHECK(a >= 0 && a < n && parents[a] == prev);
                prev = a;
            }
            const TreeLayout t = tree_layout_build(parents.data(), n);
            CHECK(r.path >= 0 && r.path < t.n_paths());
            const std::vector<int32_t> & path = t.paths[r.path];
            CHECK(path.size() >= r.accepted.size());
            CHECK(std::equal(r.accepted.begin(), r.accepted.end(), path.begin()));
        } catch (const std::invalid_argument &) {
            ++n_thrown;
        }
    }
    CHECK(n_thrown > 0 && n_thrown < n_cases / 2);
}

// Two candidates sharing their first token from two sources; a path limit of 2.
void test_tree_merge() {
    const std::vector<int32_t> t1{ 7, 8, 9 }, p1{ -1, 0, 0 }, t2{ 7, 5 }, p2{ -1, 0 }, t3{ 6 }, p3{ -1 };
    const std::vector<double> q1{ 0.6, 0.5, 0.1 }, q2{ 0.9, 0.4 }, q3{ 0.3 };
    const MergedNodes m = tree_merge({ { t1.data(), p1.data(), q1.data(), 3, 0, false },
                                       { t2.data(), p2.data(), q2.data(), 2, 1, true },
                                       { t3.data(), p3.data(), q3.data(), 1, 0, false } },
                                     2, 2);
    CHECK((m.tokens == std::vector<int32_t>{ 7, 8, 9 }));  // 5 and 6 would each add a third path
    CHECK((m.parents == std::vector<int32_t>{ -1, 0, 0 }));
    CHECK((m.probs == std::vector<double>{ 0.9, 0.5, 0.1 }) && (m.owner == std::vector<int32_t>{ 1, 0, 0 }));
    CHECK((m.held == std::vector<double>{ 0.6, 0.9, 0.5, -1.0, 0.1, -1.0 }));
    CHECK((m.held_learnt == std::vector<uint8_t>{ 0, 1, 0, 0, 0, 0 }));
    CHECK(tree_merge({}, 0, 4).tokens.empty());
    CHECK(throws_invalid([&] { tree_merge({ { t1.data(), p1.data(), q1.data(), 3, 2, false } }, 2, 4); }));
    const std::vector<int32_t> bad{ -1, 1 };
    CHECK(throws_invalid([&] { tree_merge({ { t2.data(), bad.data(), q2.data(), 2, 0, false } }, 1, 4); }));
    CHECK(throws_invalid([&] { tree_merge({ { nullptr, nullptr, nullptr, 2, 0, false } }, 1, 4); }));
}

// The likeliest sibling keeps its value; the next gets what is left, its subtree scaled with it.
void test_tree_cap_siblings() {
    const std::vector<int32_t> parents{ -1, -1, 0, 1 };
    const std::vector<double> probs{ 0.6, 0.8, 0.4, 0.3 };
    const std::vector<double> out = tree_cap_siblings(parents.data(), probs.data(), 4);
    CHECK(std::fabs(out[0] - 0.2) < 1e-12 && out[1] == 0.8 && std::fabs(out[2] - 0.4 / 3) < 1e-12 && out[3] == 0.3);
    CHECK(tree_cap_siblings(nullptr, nullptr, 0).empty());
    const std::vector<int32_t> bad{ 0 };
    CHECK(throws_invalid([&] { tree_cap_siblings(bad.data(), probs.data(), 1); }));
}

void test_tree_cap() {
    // Node 2 (0.9) is capped to its parent's 0.5 before the siblings are: the root's
    // children 0 (0.5) and 1 (0.7) sum to 1.2, so 1 keeps 0.7 and 0 gets 0.3, its child
    // scaled by 0.3 / 0.5.
    const std::vector<int32_t> parents{ -1, -1, 0 };
    const std::vector<double> probs{ 0.5, 0.7, 0.9 };
    const std::vector<double> out = tree_cap(parents.data(), probs.data(), 3);
    CHECK(std::fabs(out[0] - 0.3) < 1e-12 && out[1] == 0.7 && std::fabs(out[2] - 0.3) < 1e-12);
    CHECK(tree_cap(nullptr, nullptr, 0).empty());
    const std::vector<int32_t> bad{ 1 };
    CHECK(throws_invalid([&] { tree_cap(bad.data(), probs.data(), 1); }));
}

void test_calibration() {
    const std::vector<double> edges{ 0.2, 0.5 }, table{ 1.0, 0.5, 0.25,    // row 0
                                                        2.0, 2.0, 2.0 };   // row 1
    const BandTable t{ edges.data(), 2, table.data(), 2 };
    CHECK(calibration_band(t, 0.1) == 0 && calibration_band(t, 0.2) == 1 && calibration_band(t, 0.6) == 2);
    const std::vector<double> probs{ 0.1, 0.3, 0.8, 0.8 };
    const std::vector<int32_t> rows{ 0, 0, 0, 1 };
    const std::vector<uint8_t> keep{ 0, 0, 0, 0 }, keep_last{ 0, 0, 0, 1 };
    CHECK((calibrate(t, probs.data(), rows.data(), keep.data(), 4) == std::vector<double>{ 0.1, 0.15, 0.2, 1.0 }));
    CHECK(calibrate(t, probs.data(), rows.data(), keep_last.data(), 4)[3] == 0.8);
    const std::vector<int32_t> bad_rows{ 0, 2, 0, 0 };
    CHECK(throws_invalid([&] { calibrate(t, probs.data(), bad_rows.data(), keep.data(), 4); }));

    // A tree: node 1 under node 0; node 0 owned by source 0 (row 1, doubled then capped
    // at 1), node 1 by source 1 (row 0, band 2: a quarter), learnt nodes kept as they are.
    const std::vector<int32_t> parents{ -1, 0 }, owner{ 0, 1 }, source_rows{ 1, 0 };
    const std::vector<double> path{ 0.6, 0.8 };
    const std::vector<uint8_t> fresh{ 0, 0 }, learnt{ 1, 1 };
    CHECK((calibrate_tree(t, path.data(), parents.data(), owner.data(), fresh.data(), 2, source_rows.data(), 2) ==
           std::vector<double>{ 1.0, 0.2 }));
    CHECK((calibrate_tree(t, path.data(), parents.data(), owner.data(), learnt.data(), 2, source_rows.data(), 2) ==
           std::vector<double>{ 0.6, 0.6 }));  // no node above its parent
    const std::vector<int32_t> bad_owner{ 0, 2 };
    CHECK(throws_invalid([&] {
        calibrate_tree(t, path.data(), parents.data(), bad_owner.data(), fresh.data(), 2, source_rows.data(), 2);
    }));

    // The record: node 0 held by both sources (source 1 learnt: left out), node 1 by
    // source 1 only; both verified, node 0 accepted; counts in units of scale 0.5.
    std::vector<double> pred(6, 0.0), acc(6, 0.0);
    Record rec{ pred.data(), acc.data(), 2 };
    const std::vector<double> held{ 0.6, 0.4,      // node 0: sources 0, 1
                                    -1.0, 0.3 };   // node 1
    const std::vector<uint8_t> held_learnt{ 0, 1, 0, 0 };
    const std::vector<double> capped{ 0.5, 0.3 };
    const std::vector<int64_t> verified{ 0, 1 }, accepted{ 0 };
    calibration_record(t, rec, capped.data(), held.data(), held_learnt.data(), 2, 2, source_rows.data(),
                       verified.data(), 2, accepted.data(), 1, 0.5);
    // source 0 (row 1): min(0.6, 0.5) = 0.5 in band 2 (an edge is in the band above it),
    // accepted; source 1 (row 0): node 1's 0.3 in band 1, rejected.
    CHECK((pred == std::vector<double>{ 0.0, 0.6, 0.0, 0.0, 0.0, 1.0 }));
    CHECK((acc == std::vector<double>{ 0.0, 0.0, 0.0, 0.0, 0.0, 2.0 }));
    const std::vector<int64_t> out_of_range{ 2 };
    CHECK(throws_invalid([&] {
        calibration_record(t, rec, capped.data(), held.data(), held_learnt.data(), 2, 2, source_rows.data(),
                           out_of_range.data(), 1, accepted.data(), 1, 0.5);
    }));
}

// Random candidate sets: every merged tree is a valid tree within the path limit, every
// candidate node placed lies on it, and capped siblings never exceed their parent.
void fuzz_tree_merge(int n_cases) {
    Rng rng(17);
    for (int c = 0; c < n_cases; ++c) {
        const int32_t n_cand = 1 + static_cast<int32_t>(rng.uniform() * 4), n_sources = 3;
        std::vector<std::vector<int32_t>> toks(n_cand), pars(n_cand);
        std::vector<std::vector<double>> probs(n_cand);
        std::vector<CandidateTree> cands;
        for (int32_t k = 0; k < n_cand; ++k) {
            const int32_t n = static_cast<int32_t>(rng.uniform() * 10);
            for (int32_t i = 0; i < n; ++i) {
                toks[k].push_back(static_cast<int32_t>(rng.uniform() * 3));
                pars[k].push_back(i == 0 ? -1 : static_cast<int32_t>(rng.uniform() * (i + 1)) - 1);
                probs[k].push_back(rng.uniform());
            }
            cands.push_back({ toks[k].data(), pars[k].data(), probs[k].data(), n,
                              static_cast<int32_t>(rng.uniform() * n_sources), rng.uniform() < 0.3 });
        }
        const int32_t max_leaves = static_cast<int32_t>(rng.uniform() * 6);
        const MergedNodes m = tree_merge(cands, n_sources, max_leaves);
        const int32_t n = static_cast<int32_t>(m.tokens.size());
        tree_validate(m.parents.data(), n);
        CHECK(m.held.size() == static_cast<size_t>(n) * n_sources && m.probs.size() == static_cast<size_t>(n));
        CHECK(tree_layout_build(m.parents.data(), n).n_paths() <= std::max<int32_t>(1, max_leaves));
        const std::vector<double> capped = tree_cap_siblings(m.parents.data(), m.probs.data(), n);
        std::vector<double> sums(n + 1, 0.0);
        for (int32_t i = 0; i < n; ++i) {
            CHECK(capped[i] <= m.probs[i] + 1e-12 && m.held[static_cast<size_t>(i) * n_sources + m.owner[i]] == m.probs[i]);
            sums[m.parents[i] + 1] += capped[i];
        }
        CHECK(sums[0] <= 1.0 + 1e-9);
        for (int32_t i = 0; i < n; ++i) {
            CHECK(sums[i + 1] <= std::max(capped[i], 0.0) + 1e-9);
        }
    }
}

} // namespace

int main() {
    test_rng();
    test_argmax_and_probs();
    test_large_vocab_filters();
    test_weights_sample_edges();
    test_tree_layout();
    test_path_of_matches_layout();
    test_verify_greedy_chain();
    test_verify_chain_marginal();
    fuzz_verify(3000);
    test_tree_merge();
    test_tree_cap_siblings();
    test_tree_cap();
    test_calibration();
    fuzz_tree_merge(3000);
    std::printf("test_core: all %d checks passed\n", g_checks);
    return 0;
}
