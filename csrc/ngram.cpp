// NgramIndex (prompt lookup) and the helpers shared with ngram_cache.cpp. Declared in
// ngram.h.
#include "ngram.h"

#include "errors.h"
#include "tree.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

namespace pyaccel {

namespace {

using namespace ngram_detail;

// Calls f(n, hash) for each n-gram with n in [n_min, n_max] whose last token is at `end`.
template <class F>
void for_each_ngram_ending_at(const std::vector<int32_t> & tokens, size_t end, int32_t n_min,
                              int32_t n_max, F && f) {
    const int32_t n_fit = static_cast<int32_t>(std::min<size_t>(n_max, end + 1));
    uint64_t h = kHashSeed;
    for (int32_t n = 1; n <= n_fit; ++n) {
        h = hash_mix(h, tokens[end - (n - 1)]);
        if (n >= n_min) f(n, h);
    }
}

// A trie of the continuations that followed each earlier occurrence of the suffix.
// Node 0 is the root (the stream's last token); children are sibling-linked lists so
// that building it allocates once per node.
struct ContinuationTrie {
    struct Node {
        int32_t token, parent, count, last;  // last: most recent supporting occurrence
        int32_t context = 0;                 // longest context agreement supporting it
        int32_t source = -1;                 // the occurrence with that agreement, most recent
        int32_t first_child = -1, next_sibling = -1;
    };
    std::vector<Node> nodes{Node{-1, -1, 0, -1}};

    // Ranking of sibling / frontier nodes: longer context agreement, then more support,
    // then more recent.
    bool better(int32_t a, int32_t b) const {
        const Node & x = nodes[a];
        const Node & y = nodes[b];
        if (x.context != y.context) return x.context > y.context;
        return x.count != y.count ? x.count > y.count : x.last > y.last;
    }

    int32_t child(int32_t parent, int32_t token) {
        for (int32_t c = nodes[parent].first_child; c >= 0; c = nodes[c].next_sibling) {
            if (nodes[c].token == token) return c;
        }
        nodes.push_back(Node{token, parent, 0, -1, 0, -1, -1, nodes[parent].first_child});
        const int32_t id = static_cast<int32_t>(nodes.size()) - 1;
        nodes[parent].first_child = id;
        return id;
    }

    void insert(const int32_t * cont, size_t len, int32_t occurrence, int32_t context) {
        int32_t cur = 0;
        for (size_t i = 0; i < len; ++i) {
            cur = child(cur, cont[i]);
            nodes[cur].count += 1;
            Node & node = nodes[cur];
            node.last = std::max(node.last, occurrence);
            if (context > node.context || (context == node.context && occurrence > node.source)) {
                node.context = context;
                node.source  = occurrence;
            }
        }
    }
};

}  // namespace

// ---- helpers shared with ngram_cache.cpp ----

uint64_t ngram_detail::hash_mix(uint64_t h, int32_t token) {
    // splitmix64 finaliser over (h, token): n-gram hashes are built token by token, so
    // lengths 1..n_max at one position cost one mix each.
    uint64_t x = h ^ (static_cast<uint64_t>(static_cast<uint32_t>(token)) + kHashSeed +
                      (h << 6) + (h >> 2));
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

void ngram_detail::check_tokens(const int32_t * tokens, size_t n_tokens, const char * what) {
    for (size_t i = 0; i < n_tokens; ++i) {
        if (tokens[i] < 0) fail(what, "[", i, "] = ", tokens[i], ": token ids must be >= 0");
    }
}

void ngram_detail::check_n_range(int32_t n_min, int32_t n_max, int32_t limit, const char * who) {
    if (n_min < 1 || n_max < n_min || n_max > limit) {
        fail(who, ": need 1 <= n_min <= n_max <= ", limit, ", got n_min=", n_min,
             ", n_max=", n_max);
    }
}

// ---- NgramIndex ----

NgramIndex::NgramIndex(int32_t n_min, int32_t n_max) : n_min_(n_min), n_max_(n_max) {
    check_n_range(n_min, n_max, kMaxN, "NgramIndex");
    maps_.resize(static_cast<size_t>(n_max - n_min + 1));
}

void NgramIndex::append(const int32_t * tokens, size_t n_tokens) {
    check_tokens(tokens, n_tokens, "tokens");
    if (tokens_.size() + n_tokens > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
        fail("NgramIndex holds at most 2^31-1 tokens: start a new one");
    }
    tokens_.insert(tokens_.end(), tokens, tokens + n_tokens);
    for (size_t end = tokens_.size() - n_tokens; end < tokens_.size(); ++end) {
        for_each_ngram_ending_at(tokens_, end, n_min_, n_max_, [&](int32_t n, uint64_t h) {
            maps_[n - n_min_][h].push_back(static_cast<int32_t>(end));
        });
    }
}

void NgramIndex::truncate(size_t n) {
    if (n > tokens_.size()) {
        fail("truncate(", n, ") past the end of a ", tokens_.size(),
             "-token stream: pass a length <= size()");
    }
    // Positions were appended in increasing order, so the ones removed are at the back.
    for (size_t end = tokens_.size(); end-- > n;) {
        for_each_ngram_ending_at(tokens_, end, n_min_, n_max_, [&](int32_t len, uint64_t h) {
            PositionMap & map = maps_[len - n_min_];
            auto it = map.find(h);
            it->second.pop_back();
            if (it->second.empty()) map.erase(it);
        });
    }
    tokens_.resize(n);
}

std::vector<int32_t> NgramIndex::occurrences(int32_t n) const {
    std::vector<int32_t> ends;
    const size_t size = tokens_.size();
    if (size < static_cast<size_t>(n) + 1) return ends;  // no room for an earlier one
    const size_t last = size - 1;
    uint64_t hash = 0;
    for_each_ngram_ending_at(tokens_, last, n, n, [&hash](int32_t, uint64_t h) { hash = h; });
    auto it = maps_[n - n_min_].find(hash);
    if (it == maps_[n - n_min_].end()) return ends;
    for (int32_t end : it->second) {
        if (static_cast<size_t>(end) >= last) break;  // the suffix itself
        bool same = true;
        for (int32_t k = 0; k < n && same; ++k) same = tokens_[end - k] == tokens_[last - k];
        if (same) ends.push_back(end);
    }
    return ends;
}

int32_t NgramIndex::agreement(int32_t end, int32_t n, int32_t cap) const {
    const int32_t last = static_cast<int32_t>(tokens_.size()) - 1;
    int32_t k = n;  // the n-gram itself agrees
    while (k < cap && end - k >= 0 && tokens_[end - k] == tokens_[last - k]) ++k;
    return k;
}

DraftTree NgramIndex::build_tree(const std::vector<int32_t> & ends, int32_t n, int32_t max_len,
                                 int32_t max_candidates, int32_t context_cap) const {
    ContinuationTrie trie;
    for (int32_t end : ends) {
        const size_t begin = static_cast<size_t>(end) + 1;
        const size_t len = std::min<size_t>(max_len, tokens_.size() - begin);
        trie.insert(tokens_.data() + begin, len, end, agreement(end, n, context_cap));
    }
    auto worse = [&trie](int32_t a, int32_t b) { return trie.better(b, a); };
    std::priority_queue<int32_t, std::vector<int32_t>, decltype(worse)> frontier(worse);
    std::vector<int32_t> out_index(trie.nodes.size(), -1);
    DraftTree tree;
    for (int32_t c = trie.nodes[0].first_child; c >= 0; c = trie.nodes[c].next_sibling) {
        frontier.push(c);
    }
    // Each branch starts at the best node not in the tree yet and follows the best child
    // down to a leaf; the children passed over become candidates for later branches.
    for (int32_t branch = 0; branch < max_candidates && !frontier.empty(); ++branch) {
        int32_t cur = frontier.top();
        frontier.pop();
        while (cur >= 0) {
            const int32_t parent = trie.nodes[cur].parent;
            out_index[cur] = static_cast<int32_t>(tree.tokens.size());
            tree.tokens.push_back(trie.nodes[cur].token);
            tree.parents.push_back(parent == 0 ? -1 : out_index[parent]);
            tree.counts.push_back(trie.nodes[cur].count);
            tree.contexts.push_back(trie.nodes[cur].context);
            tree.sources.push_back(trie.nodes[cur].source);
            int32_t best = -1;
            for (int32_t c = trie.nodes[cur].first_child; c >= 0; c = trie.nodes[c].next_sibling) {
                if (best >= 0 && !trie.better(c, best)) {
                    frontier.push(c);
                    continue;
                }
                if (best >= 0) frontier.push(best);
                best = c;
            }
            cur = best;
        }
    }
    return tree;
}

DraftTree NgramIndex::lookup(int32_t n_min, int32_t n_max, int32_t max_len,
                             int32_t max_candidates, int32_t context_cap) const {
    if (n_min < n_min_ || n_max > n_max_ || n_min > n_max) {
        fail("lookup(n_min=", n_min, ", n_max=", n_max, "): need ", n_min_,
             " <= n_min <= n_max <= ", n_max_, " (the range this index was built with)");
    }
    if (max_len < 1 || max_candidates < 1 || context_cap < 0) {
        fail("lookup: max_len and max_candidates must be >= 1 and context_cap >= 0; got max_len=",
             max_len, ", max_candidates=", max_candidates, ", context_cap=", context_cap);
    }
    for (int32_t n = n_max; n >= n_min; --n) {
        const std::vector<int32_t> ends = occurrences(n);
        if (ends.empty()) continue;
        DraftTree tree = build_tree(ends, n, max_len, max_candidates, context_cap);
        tree.match_len = n;
        tree.n_occurrences = static_cast<int32_t>(ends.size());
        return tree;
    }
    return DraftTree{};
}

int32_t agreement_bucket(int32_t k, int32_t n_buckets) {
    if (n_buckets < 1) fail("agreement_bucket needs n_buckets >= 1, got ", n_buckets);
    const double half_octaves = 2.0 * std::log2(static_cast<double>(std::max(k, 1)));
    return std::min(n_buckets - 1, static_cast<int32_t>(half_octaves));
}

std::vector<double> lookup_path_probs(const DraftTree & tree, const std::vector<double> & hazard) {
    if (hazard.empty()) fail("lookup_path_probs needs a hazard curve with at least one bucket");
    const size_t n = tree.parents.size();
    if (tree.counts.size() != n || tree.contexts.size() != n) {
        fail("lookup_path_probs: parents, counts and contexts differ in length");
    }
    const auto buckets = static_cast<int32_t>(hazard.size());
    // Per parent (index + 1: the root is 0): the children's total count and the first
    // child's conditional acceptance (-1 until that child is seen).
    std::vector<double> total(n + 1, 0.0);
    std::vector<double> top(n + 1, -1.0);
    std::vector<int32_t> depth(n, 0);
    std::vector<double> prob(n, 0.0);
    for (size_t i = 0; i < n; ++i) {
        const int32_t par = tree.parents[i];
        if (par < -1 || par >= static_cast<int32_t>(i)) {
            fail("lookup_path_probs: parents[", i, "] = ", par, " is not an earlier node or -1");
        }
        total[static_cast<size_t>(par + 1)] += static_cast<double>(tree.counts[i]);
    }
    for (size_t i = 0; i < n; ++i) {
        const int32_t par = tree.parents[i];
        const size_t slot = static_cast<size_t>(par + 1);
        depth[i] = par < 0 ? 0 : depth[static_cast<size_t>(par)] + 1;
        const double above = par < 0 ? 1.0 : prob[static_cast<size_t>(par)];
        if (top[slot] < 0.0) {
            top[slot] = hazard[static_cast<size_t>(agreement_bucket(tree.contexts[i] + depth[i], buckets))];
            prob[i] = above * top[slot];
        } else {
            prob[i] = above * (1.0 - top[slot]) * static_cast<double>(tree.counts[i]) / total[slot];
        }
    }
    return prob;
}

LookupChain lookup_chain(const DraftTree & tree, int32_t n_buckets) {
    const int32_t n = static_cast<int32_t>(tree.parents.size());
    if (tree.sources.size() != tree.parents.size() || tree.contexts.size() != tree.parents.size()) {
        fail("lookup_chain: parents, sources and contexts differ in length");
    }
    const std::vector<int32_t> depth = tree_depths(tree.parents.data(), n);
    LookupChain out;
    const int32_t k = tree_chain_length(tree.parents.data(), n);
    out.tokens.assign(tree.tokens.begin(), tree.tokens.begin() + k);
    out.buckets.resize(static_cast<size_t>(k));
    for (int32_t i = 0; i < k; ++i) {
        out.buckets[static_cast<size_t>(i)] = agreement_bucket(tree.contexts[static_cast<size_t>(i)] + i, n_buckets);
    }
    out.positions.resize(static_cast<size_t>(n));
    for (int32_t j = 0; j < n; ++j) {
        out.positions[static_cast<size_t>(j)] = static_cast<int64_t>(tree.sources[static_cast<size_t>(j)]) + depth[static_cast<size_t>(j)];
    }
    return out;
}

}  // namespace pyaccel
