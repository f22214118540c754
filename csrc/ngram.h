#pragma once

// N-gram drafting: free drafts read from text the model has already seen.
//
// Two structures, two uses:
//  - NgramIndex: exact positions of every n-gram in ONE stream (prompt + output so far).
//    Prompt lookup: when the last n tokens occurred before, what followed them then is a
//    good guess for what follows now (code editing, RAG, summaries copy long spans).
//  - NgramCache: n-gram -> next-token counts, no positions, so it can persist across
//    calls and be built from a corpus (llama.cpp's common/ngram-cache idea). Drafting
//    combines a context cache, a dynamic cache and a static cache.
//
// All token ids are int32 and must be >= 0 (negative ids are rejected: the caches use
// -1 as padding inside their fixed-size keys). Objects are not thread-safe: do not
// mutate one from two threads at once.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace pyaccel {

// ---------------------------------------------------------------------------------------
// Prompt-lookup index
// ---------------------------------------------------------------------------------------

// A draft tree. Node i holds tokens[i]; parents[i] is the index of its parent node or -1
// for a child of the root (the last committed token). parents[i] < i, so a node always
// comes after its parent, and a single continuation is a chain (parents = -1, 0, 1, ...).
// Node order: the best branch first, then the nodes each further branch adds, in the
// order the branches were chosen. counts[i] = how many earlier occurrences support the
// path root..i; contexts[i] = the longest context agreement among them: how many tokens
// before the occurrence equal the stream's last tokens (see NgramIndex::lookup);
// sources[i] = the end position of the best-ranked of them (longest agreement, then the
// most recent), so node i's token is at sources[i] + depth(i) + 1 in the stream.
struct DraftTree {
    std::vector<int32_t> tokens;
    std::vector<int32_t> parents;
    std::vector<int32_t> counts;
    std::vector<int32_t> contexts;
    std::vector<int32_t> sources;
    int32_t match_len     = 0;  // n of the matched suffix n-gram; 0 when nothing matched
    int32_t n_occurrences = 0;  // earlier occurrences of that n-gram (all, before pruning)
};

// Incremental index of all n-grams with n in [n_min, n_max] over one token stream.
//
// Memory: one position per (position, n). append is O(#new * n_max); truncate is
// O(#removed * n_max); lookup is O(n_max * n_occurrences * max_len).
class NgramIndex {
public:
    static constexpr int32_t kMaxN = 64;
    // Prompt lookup as llama.cpp's lookup examples do it: 1..4-token contexts.
    static constexpr int32_t kDefaultNMin = 1;
    static constexpr int32_t kDefaultNMax = 4;

    // n_min, n_max: the n-gram lengths indexed; 1 <= n_min <= n_max <= kMaxN.
    explicit NgramIndex(int32_t n_min = kDefaultNMin, int32_t n_max = kDefaultNMax);

    // tokens: appended to the end of the stream; every n-gram that ENDS at a new
    // position is indexed. Nothing already indexed is rescanned.
    void append(const int32_t * tokens, size_t n_tokens);

    // n: new length of the stream, 0 <= n <= size(). Drops the tokens after n (rollback
    // after a rejected draft) and their n-grams.
    void truncate(size_t n);

    // Drafts from the earlier occurrences of the stream's suffix.
    // n_min, n_max: suffix lengths to try, longest first; must lie within the index's
    //   own [n_min, n_max]. The first n with at least one earlier occurrence is used.
    // max_len: >= 1, the longest continuation taken from any occurrence (tree depth).
    //   Continuations stop at the end of the stream.
    // max_candidates: >= 1, the most branches (leaves) the tree may have.
    // context_cap: >= 0. Each occurrence's context agreement is how many tokens ending at
    //   it equal the stream's last tokens, counted up to max(n, context_cap): beyond the
    //   matched n it tells a copy (hundreds of tokens agree) from a chance repeat.
    // Ranking of nodes: larger context agreement of their supporting occurrences, then
    //   larger count, then the most recent occurrence. Branch 1 is the greedy chain (at
    //   each node the best-ranked child); each further branch starts at the best-ranked
    //   not-yet-taken node whose parent is in the tree, and continues greedily. With
    //   context_cap <= n every agreement is n and the ranking is by count alone.
    // The occurrence that ends at the very end of the stream (the suffix itself) is not
    // an earlier occurrence and is never used. Deterministic.
    DraftTree lookup(int32_t n_min, int32_t n_max, int32_t max_len,
                     int32_t max_candidates, int32_t context_cap = 0) const;

    size_t size() const { return tokens_.size(); }
    const std::vector<int32_t> & tokens() const { return tokens_; }
    int32_t n_min() const { return n_min_; }
    int32_t n_max() const { return n_max_; }

private:
    // Per n: hash of the n-gram -> end positions (index of its last token), ascending.
    // Hashes can collide; lookup re-checks the tokens.
    using PositionMap = std::unordered_map<uint64_t, std::vector<int32_t>>;

    std::vector<int32_t> occurrences(int32_t n) const;
    int32_t agreement(int32_t end, int32_t n, int32_t cap) const;
    DraftTree build_tree(const std::vector<int32_t> & ends, int32_t n, int32_t max_len,
                         int32_t max_candidates, int32_t context_cap) const;

    int32_t n_min_;
    int32_t n_max_;
    std::vector<int32_t> tokens_;
    std::vector<PositionMap> maps_;  // maps_[n - n_min_]
};

// Bucket of context agreement k (half-octaves: 1, 2, 3, 4-5, 6-7, 8-11, 12-15, 16-22, ...):
// min(n_buckets - 1, floor(2 log2 max(k, 1))). n_buckets >= 1.
int32_t agreement_bucket(int32_t k, int32_t n_buckets);

// P(node accepted) for every node of a lookup tree, from a hazard curve over agreement
// buckets: hazard[b] = P(the copy goes on | a token after k agreeing tokens, b =
// agreement_bucket(k, hazard.size())); hazard must not be empty.
// P(node) = P(parent accepted) * c(node) (the root is accepted). The first child of a
// parent in node order (its best-ranked) continues the occurrence with the longest
// agreement: c = hazard[agreement_bucket(contexts[i] + depth(i))], depth 0 for a child of
// the root. Every other child shares the rest, 1 - that, by its count over the counts of
// all the parent's children. O(n) in the tree's nodes.
std::vector<double> lookup_path_probs(const DraftTree & tree, const std::vector<double> & hazard);

// A lookup tree as prompt lookup reads it each step. The chain is the tree's first
// branch: nodes 0 .. n - 1 while node i >= 1 is the child of node i - 1 (n = 0 for an
// empty tree). buckets[i] = agreement_bucket(contexts[i] + i, n_buckets) for chain node
// i (n_buckets >= 1); positions[j] = sources[j] + depth(j) for every node j, the stream
// index node j copies (depth 1 for a child of the root). The tree's parents must be
// valid (parents[j] in [-1, j)). O(nodes).
struct LookupChain {
    std::vector<int32_t> tokens;
    std::vector<int32_t> buckets;
    std::vector<int64_t> positions;
};
LookupChain lookup_chain(const DraftTree & tree, int32_t n_buckets);

// ---------------------------------------------------------------------------------------
// Persistent n-gram caches
// ---------------------------------------------------------------------------------------

constexpr int32_t kNgramCacheMaxN = 4;

// An n-gram of up to kNgramCacheMaxN tokens; unused trailing slots hold -1, so the
// length is part of the key.
struct NgramKey {
    std::array<int32_t, kNgramCacheMaxN> tokens;
    bool operator==(const NgramKey & other) const { return tokens == other.tokens; }
    bool operator<(const NgramKey & other) const { return tokens < other.tokens; }
};

struct NgramKeyHash {
    size_t operator()(const NgramKey & key) const;
};

struct TokenCount {
    int32_t token;
    uint32_t count;  // saturates at UINT32_MAX
};

// The tokens that followed one n-gram and how often, ascending by token: a flat vector
// (most n-grams have one or two followers; a hash map each would cost ~100 bytes) with a
// deterministic order and binary search.
using NgramFollowers = std::vector<TokenCount>;

// Count of token among followers; 0 when it never followed.
uint32_t ngram_followers_count(const NgramFollowers & followers, int32_t token);

class NgramCache {
public:
    // n_min, n_max: the n-gram lengths counted; 1 <= n_min <= n_max <= kNgramCacheMaxN.
    static constexpr int32_t kDefaultNMin = 1;
    explicit NgramCache(int32_t n_min = kDefaultNMin, int32_t n_max = kNgramCacheMaxN);

    // tokens: a whole stream. start: index of the first token not counted yet. For every
    // i >= start and every n in [n_min, n_max] with i >= n, counts tokens[i] as a
    // follower of tokens[i-n .. i-1]. So update(t[:k], 0) then update(t, k) equals
    // update(t, 0): call it with the grown stream and its previous length.
    void update(const int32_t * tokens, size_t n_tokens, size_t start);

    // Adds other's counts to this cache. Both must count the same n range. Vocabularies:
    // a 0 side adopts the other's fingerprint; two different nonzero fingerprints throw
    // std::invalid_argument (the token ids mean different texts) and leave this unchanged.
    void merge(const NgramCache & other);

    // path: written via a temporary file and renamed, so a crash never leaves a
    // half-written cache. Format: see ngram_cache.cpp (magic, version, n range, vocabulary
    // fingerprint, checksum).
    void save(const std::string & path) const;
    // Throws std::invalid_argument naming the file when it is missing, truncated,
    // corrupted or of another format version. The fingerprint is read back as saved (0
    // from files written before it was recorded); checking it is the caller's job.
    static NgramCache load(const std::string & path);

    // ngram: n_tokens in [n_min, n_max] tokens. Returns nullptr when never seen.
    const NgramFollowers * find(const int32_t * ngram, size_t n_tokens) const;

    size_t size() const { return map_.size(); }  // distinct n-grams
    int32_t n_min() const { return n_min_; }
    int32_t n_max() const { return n_max_; }

    // The fingerprint of the tokenizer whose ids this cache counts: any 32-bit digest of
    // the vocabulary the caller chooses (pyaccel: vocab.fingerprint), saved with the
    // cache; 0 = unknown (a new cache, or a file saved before it was recorded). The core
    // never computes it and, except in merge, never compares it.
    uint32_t vocab() const { return vocab_; }
    void set_vocab(uint32_t vocab) { vocab_ = vocab; }

private:
    int32_t n_min_;
    int32_t n_max_;
    uint32_t vocab_ = 0;
    std::unordered_map<NgramKey, NgramFollowers, NgramKeyHash> map_;
};

// When a cache's evidence for the next token is weaker than these, drafting stops: a
// wrong draft token costs a verification slot on devices where slots are not free.
// Indexed by n - 1. The context cache (this prompt + output) is trusted more than the
// dynamic cache (earlier calls), hence its lower ("lax") bars. Defaults are llama.cpp's.
struct NgramDraftThresholds {
    using Table = std::array<int32_t, kNgramCacheMaxN>;
    Table context_min_samples = {2, 2, 1, 1};
    Table context_min_percent = {66, 50, 50, 50};
    Table dynamic_min_samples = {4, 3, 2, 2};
    Table dynamic_min_percent = {75, 66, 66, 66};
    // The static cache (corpus) votes with n-grams of this length, and drafts on its own
    // when neither other cache can, under these bars.
    int32_t static_n           = 2;
    int32_t static_min_samples = 2;
    int32_t static_min_percent = 50;
    // A candidate's score is count * static_weight * static_count when the static cache
    // saw it after the same static_n-gram, else count * 1: corpus agreement dominates.
    int32_t static_weight = 100;
};

// Drafts a chain of up to n_draft tokens to follow context_tokens.
// context_tokens: prompt + output so far (the draft continues it).
// context_cache: built from context_tokens (lax thresholds).
// dynamic_cache: accumulated over earlier calls (strict thresholds).
// static_cache: from a corpus, or nullptr; must count n = thresholds.static_n.
// n_draft: >= 0, the most tokens to draft.
// At each step the longest n-gram of the context cache that passes its thresholds gives
// the token, else the dynamic cache's, else the static cache's; drafting stops at the
// first step where none does. Ties go to the smaller token id (deterministic).
std::vector<int32_t> ngram_cache_draft(const int32_t * context_tokens, size_t n_context,
                                       const NgramCache & context_cache,
                                       const NgramCache & dynamic_cache,
                                       const NgramCache * static_cache, int32_t n_draft,
                                       const NgramDraftThresholds & thresholds);

// Throws std::invalid_argument when a threshold is out of range (percent outside
// 0..100, negative samples, static_n outside 1..kNgramCacheMaxN, static_weight < 1).
void ngram_thresholds_check(const NgramDraftThresholds & thresholds);

// Shared by ngram.cpp and ngram_cache.cpp; not part of the API.
namespace ngram_detail {

constexpr uint64_t kHashSeed = 0x9e3779b97f4a7c15ULL;
uint64_t hash_mix(uint64_t h, int32_t token);

// Throw unless every token id is >= 0 / unless 1 <= n_min <= n_max <= limit.
void check_tokens(const int32_t * tokens, size_t n_tokens, const char * what);
void check_n_range(int32_t n_min, int32_t n_max, int32_t limit, const char * who);

}  // namespace ngram_detail

}  // namespace pyaccel
