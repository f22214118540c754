#pragma once

// Lookahead decoding state: a Jacobi window that guesses tokens ahead of the pending root,
// and the pool of n-grams its guesses (and the text so far) leave behind.
//
// One pass of the target evaluates, besides the root and the verified candidates, every
// cell of the window. The window has N - 1 levels (0 = oldest Jacobi iteration) over W
// columns; cell (l, i) guesses the token at offset l + i from the pending root r (offset
// 0), and cell (0, 0) IS the root. Column i's attention sequence holds r, the level-0
// cells of columns 1..i and the column's own cells of levels 1..N-2, so every cell sees a
// contiguous run of guesses behind it (W = 4, N = 4; cells written l,i; `.` = not in the
// sequence):
//
//     offset   0  1    2    3    1    2    3    4    2    3    4    5
//     cell     r  0,1  0,2  0,3  1,0  1,1  1,2  1,3  2,0  2,1  2,2  2,3
//     seq 0    x  .    .    .    x    .    .    .    x    .    .    .
//     seq 1    x  x    .    .    .    x    .    .    .    x    .    .
//     seq 2    x  x    x    .    .    .    x    .    .    .    x    .
//     seq 3    x  x    x    x    .    .    .    x    .    .    .    x
//
// The newest level's logits give the next level: next[i] = the target's choice after cell
// (N-2, i), a guess at offset N - 1 + i. Column f then holds N tokens at consecutive
// offsets f .. f + N - 1 (its cells of every level, then next[f]): one n-gram for the
// pool, under its first token.
//
// All token ids are int32 >= 0. Objects are not thread-safe.

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace pyaccel {

// n-grams of exactly n tokens keyed by their first token, at most max_per_key per key.
// Every add of an n-gram already held, and every refresh, makes it the most recently
// useful of its key; a full key drops its least recently useful n-gram for a new one.
class NgramPool {
public:
    // n in [2, 64]; max_per_key >= 1.
    NgramPool(int32_t n, int32_t max_per_key);

    // Adds ngram[0..n) under ngram[0]; true when it was not held before.
    bool add(const int32_t * ngram);
    // Adds every n-gram of tokens[0..len) in stream order (later ones are more recent).
    void add_stream(const int32_t * tokens, size_t len);
    // Up to `limit` continuations (n - 1 tokens each) of `key`, most recently useful first.
    std::vector<std::vector<int32_t>> continuations(int32_t key, size_t limit) const;
    // Makes every held n-gram under `key` whose continuation starts with prefix[0..len)
    // the most recently useful (len >= 1; the ones that verification just confirmed).
    void refresh(int32_t key, const int32_t * prefix, size_t len);

    int32_t n() const { return n_; }
    int32_t max_per_key() const { return max_per_key_; }
    size_t size() const { return size_; }
    size_t n_keys() const { return map_.size(); }
    void clear();

private:
    struct Entry {
        std::vector<int32_t> cont;  // n - 1 tokens after the key
        uint64_t stamp;             // larger = more recently useful
    };
    int32_t n_;
    int32_t max_per_key_;
    uint64_t clock_ = 0;
    size_t size_ = 0;
    std::unordered_map<int32_t, std::vector<Entry>> map_;
};

// The Jacobi window of W columns and N - 1 levels, in the layout drawn above.
class JacobiWindow {
public:
    // w >= 1, n in [3, 64].
    JacobiWindow(int32_t w, int32_t n);

    int32_t width() const { return w_; }
    int32_t ngram() const { return n_; }
    // Cells evaluated per pass (every cell but the root): (W - 1) + W (N - 2).
    int32_t n_tokens() const { return (w_ - 1) + w_ * (n_ - 2); }

    // Every cell but the root from `fill` (non-empty), cycled in level-major order.
    void reset(const std::vector<int32_t> & fill);
    // Cell (0, 0): the pending root of the next pass.
    void set_root(int32_t root);

    // The pass layout of the cells, in batch order: level 0 columns 1..W-1, then levels
    // 1..N-2 columns 0..W-1. offsets[k] >= 1 from the root; seqs[k]: column sequences.
    std::vector<int32_t> tokens() const;
    std::vector<int32_t> offsets() const;
    std::vector<std::vector<int32_t>> seqs() const;
    // Index, in that batch order, of cell (N-2, i) for i = 0..W-1: the rows whose logits
    // give `next`.
    std::vector<int32_t> output_rows() const;

    // After a pass: next[i] (W tokens) from the newest level's rows. Adds each column's
    // n-gram to `pool` (when not null), shifts the levels up (the oldest dropped, next
    // becomes the newest) and, when `committed` >= 2 tokens were committed by the pass
    // (accepted + the next token), shifts the columns left by committed - 1 so that each
    // cell keeps guessing its own position; the columns freed on the right are refilled
    // from `fill` (cycled, non-empty). The root is left for set_root.
    void advance(const std::vector<int32_t> & next, int32_t committed, const std::vector<int32_t> & fill,
                 NgramPool * pool);

    // cells[l][i] (cell (0, 0) is the last root set).
    const std::vector<std::vector<int32_t>> & cells() const { return cells_; }

private:
    int32_t w_;
    int32_t n_;
    std::vector<std::vector<int32_t>> cells_;  // [N - 1][W]
};

}  // namespace pyaccel
