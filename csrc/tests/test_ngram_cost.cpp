// Standalone checks of ngram.{h,cpp}, ngram_cache.cpp and cost.{h,cpp} against brute-force
// references. Built and run under sanitizers by run_sanitizers.sh.
// Usage: test_ngram_cost [scratch_dir]   (cache files are written there; default /tmp)

#include "cost.h"
#include "ngram.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace pyaccel;

static int g_failures = 0;

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,     \
                         __LINE__, #cond);                                  \
            ++g_failures;                                                   \
        }                                                                   \
    } while (0)

static bool throws_invalid(const std::function<void()> & f) {
    try {
        f();
    } catch (const std::invalid_argument &) {
        return true;
    }
    return false;
}

// ---- NgramIndex --------------------------------------------------------------------------

// Earlier occurrences (end positions) of the last n tokens, by plain scanning.
static std::vector<int32_t> brute_occurrences(const std::vector<int32_t> & s, int32_t n) {
    std::vector<int32_t> ends;
    const int32_t size = static_cast<int32_t>(s.size());
    for (int32_t end = n - 1; end < size - 1; ++end) {
        bool same = true;
        for (int32_t k = 0; k < n && same; ++k) same = s[end - k] == s[size - 1 - k];
        if (same) ends.push_back(end);
    }
    return ends;
}

// Tree invariants: topological order, every root path is a real continuation, and
// counts[i] equals the number of occurrences whose continuation starts with that path.
static void check_tree(const std::vector<int32_t> & s, const DraftTree & t, int32_t n_min,
                       int32_t n_max, int32_t max_len, int32_t max_cand) {
    int32_t match = 0;
    std::vector<int32_t> ends;
    for (int32_t n = n_max; n >= n_min && match == 0; --n) {
        if (static_cast<int32_t>(s.size()) < n) continue;
        ends = brute_occurrences(s, n);
        if (!ends.empty()) match = n;
    }
    CHECK(t.match_len == match);
    CHECK(t.n_occurrences == static_cast<int32_t>(ends.size()));
    if (match == 0) {
        CHECK(t.tokens.empty());
        return;
    }
    const size_t m = t.tokens.size();
    CHECK(t.parents.size() == m && t.counts.size() == m && m > 0);
    std::vector<bool> has_child(m, false);
    for (size_t i = 0; i < m; ++i) {
        CHECK(t.parents[i] >= -1 && t.parents[i] < static_cast<int32_t>(i));
        std::vector<int32_t> path;
        for (int32_t j = static_cast<int32_t>(i); j >= 0; j = t.parents[j]) {
            path.insert(path.begin(), t.tokens[j]);
        }
        if (t.parents[i] >= 0) has_child[t.parents[i]] = true;
        CHECK(static_cast<int32_t>(path.size()) <= max_len);
        int32_t support = 0;
        for (int32_t end : ends) {
            bool ok = static_cast<size_t>(end) + path.size() < s.size();
            for (size_t k = 0; k < path.size() && ok; ++k) ok = s[end + 1 + k] == path[k];
            support += ok;
        }
        CHECK(support == t.counts[i]);
    }
    int32_t leaves = 0;
    for (size_t i = 0; i < m; ++i) leaves += !has_child[i];
    CHECK(leaves >= 1 && leaves <= max_cand);
}

static void test_index_random() {
    std::mt19937 rng(1234);
    for (int trial = 0; trial < 300; ++trial) {
        const int32_t alphabet = 2 + trial % 4;
        const int32_t n_min = 1 + trial % 2, n_max = n_min + trial % 3;
        NgramIndex index(n_min, n_max);
        std::vector<int32_t> ref;
        for (int op = 0; op < 12; ++op) {
            if (rng() % 4 == 0 && !ref.empty()) {
                const size_t keep = rng() % (ref.size() + 1);
                index.truncate(keep);
                ref.resize(keep);
            } else {
                std::vector<int32_t> add(rng() % 9);
                for (auto & tok : add) tok = static_cast<int32_t>(rng() % alphabet);
                index.append(add.data(), add.size());
                ref.insert(ref.end(), add.begin(), add.end());
            }
            CHECK(index.tokens() == ref);
            const int32_t max_len = 1 + rng() % 5, max_cand = 1 + rng() % 4;
            check_tree(ref, index.lookup(n_min, n_max, max_len, max_cand), n_min, n_max, max_len,
                       max_cand);
        }
        // A rebuilt index answers exactly like the incrementally edited one.
        NgramIndex fresh(n_min, n_max);
        fresh.append(ref.data(), ref.size());
        const DraftTree a = index.lookup(n_min, n_max, 4, 3), b = fresh.lookup(n_min, n_max, 4, 3);
        CHECK(a.tokens == b.tokens && a.parents == b.parents && a.counts == b.counts);
    }
}

static void test_index_handmade() {
    // "1 2 3 | 1 2 4 | 1 2 3 | 1 2": suffix "1 2" occurred 3 times, followed by 3, 4, 3.
    const std::vector<int32_t> s = {1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 2};
    NgramIndex index(1, 3);
    index.append(s.data(), s.size());
    const DraftTree chain = index.lookup(1, 3, 3, 1);
    CHECK(chain.match_len == 3);  // "3 1 2" occurred once (ends at 4) -> 4 1 2
    CHECK((chain.tokens == std::vector<int32_t>{4, 1, 2}));
    const DraftTree tree = index.lookup(1, 2, 2, 2);
    CHECK(tree.match_len == 2 && tree.n_occurrences == 3);
    CHECK((tree.tokens == std::vector<int32_t>{3, 1, 4, 1}));  // branches 3 1 and 4 1
    CHECK((tree.parents == std::vector<int32_t>{-1, 0, -1, 2}));
    CHECK((tree.counts == std::vector<int32_t>{2, 2, 1, 1}));
    CHECK(throws_invalid([&] { index.lookup(1, 4, 2, 1); }));
    CHECK(throws_invalid([&] { index.lookup(1, 2, 0, 1); }));
    CHECK(throws_invalid([&] { index.truncate(99); }));
    const int32_t bad = -5;
    CHECK(throws_invalid([&] { index.append(&bad, 1); }));
    CHECK(throws_invalid([] { NgramIndex(0, 2); }));
}

// ---- NgramCache --------------------------------------------------------------------------

using RefCache = std::map<std::vector<int32_t>, std::map<int32_t, uint32_t>>;

static std::string g_scratch_dir = "/tmp";

static std::string read_bytes(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

static void write_bytes(const std::string & path, const std::string & data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(data.data(), data.size());
}

static void put_le(std::string & bytes, size_t at, uint64_t value, int n_bytes) {
    for (int i = 0; i < n_bytes; ++i) bytes[at + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

// The file's checksum field: FNV-1a-64 over the 40 header bytes before it, then the
// payload after the 48-byte header (the layout ngram_cache.cpp documents).
static void reseal(std::string & bytes) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < bytes.size(); ++i) {
        if (i >= 40 && i < 48) continue;
        h = (h ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ULL;
    }
    put_le(bytes, 40, h, 8);
}

static void check_cache(const NgramCache & c, const RefCache & ref) {
    CHECK(c.size() == ref.size());
    for (const auto & [ngram, followers] : ref) {
        const NgramFollowers * got = c.find(ngram.data(), ngram.size());
        CHECK(got != nullptr && got->size() == followers.size());
        for (const auto & [tok, count] : followers) {
            CHECK(got != nullptr && ngram_followers_count(*got, tok) == count);
        }
    }
}

static void ref_update(RefCache & ref, const std::vector<int32_t> & s, int32_t n_min,
                       int32_t n_max) {
    for (size_t i = 0; i < s.size(); ++i) {
        for (int32_t n = n_min; n <= n_max && static_cast<size_t>(n) <= i; ++n) {
            ref[std::vector<int32_t>(s.begin() + i - n, s.begin() + i)][s[i]] += 1;
        }
    }
}

static void test_cache() {
    std::mt19937 rng(99);
    std::vector<int32_t> s(400);
    for (auto & tok : s) tok = static_cast<int32_t>(rng() % 7);
    NgramCache inc(1, 3), full(1, 3);
    inc.update(s.data(), 150, 0);
    inc.update(s.data(), s.size(), 150);
    full.update(s.data(), s.size(), 0);
    RefCache ref;
    ref_update(ref, s, 1, 3);
    check_cache(inc, ref);
    check_cache(full, ref);
    inc.merge(full);
    for (auto & entry : ref) {
        for (auto & follower : entry.second) follower.second *= 2;
    }
    check_cache(inc, ref);

    const std::string path = g_scratch_dir + "/pyaccel_test_ngram_cost.bin";
    inc.save(path);
    check_cache(NgramCache::load(path), ref);
    const std::string bytes = read_bytes(path);
    auto write = [&](const std::string & data) { write_bytes(path, data); };
    for (size_t cut : {size_t{0}, size_t{5}, size_t{47}, bytes.size() / 2, bytes.size() - 1}) {
        write(bytes.substr(0, cut));
        CHECK(throws_invalid([&] { NgramCache::load(path); }));
    }
    for (size_t at : {size_t{3}, size_t{13}, size_t{30}, bytes.size() / 2, bytes.size() - 1}) {
        std::string flipped = bytes;
        flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
        write(flipped);
        CHECK(throws_invalid([&] { NgramCache::load(path); }));
    }
    std::remove(path.c_str());
    CHECK(throws_invalid([&] { NgramCache::load(path); }));
    NgramCache other(2, 2);
    CHECK(throws_invalid([&] { inc.merge(other); }));
}

// A file whose checksum matches but whose follower count is absurd (0xffffffff for a
// 20-byte payload) is rejected as truncated, without first allocating for that count
// (which used to ask for 32 GiB: std::bad_alloc, or an ASan abort).
static void test_cache_huge_count() {
    const std::string path = g_scratch_dir + "/pyaccel_test_ngram_count.bin";
    NgramCache one(1, 1);
    const std::vector<int32_t> s = {0, 1};
    one.update(s.data(), s.size(), 0);
    one.save(path);
    std::string bytes = read_bytes(path);
    CHECK(bytes.size() == 48 + 20);  // u32 n | i32 token | u32 n_followers | i32 token | u32 count
    put_le(bytes, 48 + 8, 0xffffffffULL, 4);
    reseal(bytes);
    write_bytes(path, bytes);
    std::string message;
    try {
        NgramCache::load(path);
    } catch (const std::invalid_argument & e) {
        message = e.what();
    }
    CHECK(message.find("is truncated") != std::string::npos);
    std::remove(path.c_str());
}

static void test_cache_draft() {
    // The context repeats "5 6 7 8"; after "... 5 6" the context cache drafts 7 8 5 6 ...
    std::vector<int32_t> ctx;
    for (int rep = 0; rep < 3; ++rep) ctx.insert(ctx.end(), {5, 6, 7, 8});
    ctx.insert(ctx.end(), {5, 6});
    NgramCache context(1, 4), dynamic(1, 4);
    context.update(ctx.data(), ctx.size(), 0);
    const NgramDraftThresholds th;
    const std::vector<int32_t> d = ngram_cache_draft(ctx.data(), ctx.size(), context, dynamic,
                                                     nullptr, 5, th);
    CHECK((d == std::vector<int32_t>{7, 8, 5, 6, 7}));
    CHECK(ngram_cache_draft(ctx.data(), ctx.size(), context, dynamic, nullptr, 0, th).empty());
    // Nothing known: empty draft. A static cache alone drafts when it is sure enough.
    const std::vector<int32_t> fresh = {1, 2};
    NgramCache empty(1, 4), stat(2, 2);
    CHECK(ngram_cache_draft(fresh.data(), 2, empty, empty, nullptr, 3, th).empty());
    const std::vector<int32_t> corpus = {1, 2, 3, 1, 2, 3, 9};
    stat.update(corpus.data(), corpus.size(), 0);
    const std::vector<int32_t> from_static =
        ngram_cache_draft(fresh.data(), 2, empty, empty, &stat, 1, th);
    CHECK((from_static == std::vector<int32_t>{3}));
    NgramCache stat3(3, 3);
    CHECK(throws_invalid([&] { ngram_cache_draft(fresh.data(), 2, empty, empty, &stat3, 1, th); }));
}

// ---- Cost --------------------------------------------------------------------------------

static CostCurve cpu_curve() {
    return CostCurve::from_points({1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64},
                                  {1.00, 1.73, 2.34, 2.90, 3.38, 4.01, 6.95, 7.96, 8.29, 8.31,
                                   10.9, 12.9, 15.4, 22.6, 28.1});
}

static void test_chain_plan() {
    const CostCurve cpu = cpu_curve();
    CHECK(cpu.measured() == 64 && std::fabs(cpu.cost_at(7) - 5.48) < 1e-9);
    CHECK(std::fabs(cpu.cost_at(66) - (28.1 + 2 * (28.1 - cpu.cost_at(63)))) < 1e-9);
    const std::vector<double> high(16, 0.9), low(16, 0.3);
    const ChainPlan hp = chain_plan(cpu, high.data(), high.size(), 0.0, 16);
    CHECK(hp.best_len == 4 && hp.expected_speedup > 1.2);
    CHECK(chain_plan(cpu, low.data(), low.size(), 0.0, 16).best_len == 0);
    CHECK(chain_plan(cpu, high.data(), high.size(), 0.6, 16).best_len == 0);
    std::vector<double> flat(64);
    for (int b = 1; b <= 64; ++b) flat[b - 1] = 1.0 + 0.01 * b;
    const std::vector<double> modest(32, 0.7);
    CHECK(chain_plan(CostCurve(flat), modest.data(), modest.size(), 0.0, 32).best_len >= 8);
    CHECK(throws_invalid([&] { chain_plan(cpu, high.data(), 3, 0.0, 4); }));
    // A plateau: 12..16 tokens cost the same, so only 16 of them is worth verifying.
    std::vector<double> steps(cpu.times().begin(), cpu.times().begin() + 20);
    for (int b = 12; b <= 16; ++b) steps[b - 1] = 8.3;
    const std::vector<int32_t> eff = CostCurve(steps).efficient_sizes(20);
    CHECK(std::find(eff.begin(), eff.end(), 16) != eff.end());
    for (int b = 12; b < 16; ++b) CHECK(std::find(eff.begin(), eff.end(), b) == eff.end());
    // Cheap up to 11 tokens, then a step to a plateau 12..16, then expensive: the plan
    // drafts 15 (verifies 16), never 11..14, which cost the same and commit less.
    std::vector<double> plateau(24);
    for (int b = 1; b <= 24; ++b) {
        plateau[b - 1] = b <= 11 ? 1.0 + 0.01 * b : b <= 16 ? 1.12 : 1.12 + 0.5 * (b - 16);
    }
    CHECK(chain_plan(CostCurve(plateau), high.data(), high.size(), 0.0, 16).best_len == 15);
}

static void test_tree_plan() {
    // root ─┬─ 0 (0.8) ─┬─ 2 (0.6) ── 4 (0.5)
    //       │           └─ 3 (0.1)
    //       └─ 1 (0.15)
    const std::vector<int32_t> parents = {-1, -1, 0, 0, 2};
    const std::vector<double> prob = {0.8, 0.15, 0.6, 0.1, 0.5};
    std::vector<double> flat(16);
    for (int b = 1; b <= 16; ++b) flat[b - 1] = 1.0 + 0.01 * b;
    const TreePlan all = tree_plan(CostCurve(flat), prob.data(), parents.data(), 5, 5);
    CHECK((all.nodes == std::vector<int32_t>{0, 1, 2, 3, 4}));
    const TreePlan three = tree_plan(CostCurve(flat), prob.data(), parents.data(), 5, 3);
    CHECK((three.nodes == std::vector<int32_t>{0, 2, 4}));
    CHECK((three.parents == std::vector<int32_t>{-1, 0, 1}));
    CHECK(std::fabs(three.expected_tokens - 2.9) < 1e-12);
    CHECK(tree_plan(cpu_curve(), prob.data(), parents.data(), 5, 5).nodes.size() <= 3);
    const std::vector<int32_t> bad = {-1, 3};
    CHECK(throws_invalid([&] { tree_plan(CostCurve(flat), prob.data(), bad.data(), 2, 2); }));
}

static void test_acceptance_stats() {
    AcceptanceStats stats(4, 0.5, 0.5, 2.0);
    CHECK((stats.alpha() == std::vector<double>(4, 0.5)));
    stats.observe(3, 1);  // position 0 accepted, position 1 rejected, position 2 untried
    stats.observe(6, 6);  // all tried and accepted (positions >= 4 ignored)
    const std::vector<double> a = stats.alpha();
    CHECK(std::fabs(a[0] - (1.5 + 1.0) / (1.5 + 2.0)) < 1e-12);
    CHECK(std::fabs(a[1] - (1.0 + 1.0) / (1.5 + 2.0)) < 1e-12);
    CHECK(std::fabs(a[2] - (1.0 + 1.0) / (1.0 + 2.0)) < 1e-12);
    CHECK(throws_invalid([&] { stats.observe(1, 2); }));
    // The largest legal counts: every tracked position tried and accepted, no overflow.
    AcceptanceStats fresh(2, 1.0, 0.5, 0.0);
    fresh.observe(INT32_MAX, INT32_MAX);
    CHECK((fresh.alpha() == std::vector<double>(2, 1.0)));
    CHECK(throws_invalid([] { AcceptanceStats(2, 0.0); }));
}

int main(int argc, char ** argv) {
    if (argc > 1) g_scratch_dir = argv[1];
    test_index_random();
    test_index_handmade();
    test_cache();
    test_cache_huge_count();
    test_cache_draft();
    test_chain_plan();
    test_tree_plan();
    test_acceptance_stats();
    if (g_failures != 0) {
        std::fprintf(stderr, "%d check(s) failed\n", g_failures);
        return 1;
    }
    std::printf("test_ngram_cost: all checks passed\n");
    return 0;
}
