#include "lookahead.h"

#include "errors.h"

#include <algorithm>

namespace pyaccel {

namespace {

void check_token(int32_t t, const char * what) {
    if (t < 0) fail(what, " token ", t, " is negative: token ids are >= 0");
}

void check_fill(const std::vector<int32_t> & fill) {
    if (fill.empty()) fail("fill is empty: give at least one token to initialise window cells with");
    for (int32_t t : fill) check_token(t, "fill");
}

}  // namespace

// ---- NgramPool ------------------------------------------------------------------------

NgramPool::NgramPool(int32_t n, int32_t max_per_key) : n_(n), max_per_key_(max_per_key) {
    if (n < 2 || n > 64) fail("pool n-gram length n = ", n, " must be in [2, 64]");
    if (max_per_key < 1) fail("max_per_key = ", max_per_key, " must be >= 1");
}

bool NgramPool::add(const int32_t * ngram) {
    for (int32_t i = 0; i < n_; ++i) check_token(ngram[i], "n-gram");
    std::vector<Entry> & held = map_[ngram[0]];
    const uint64_t stamp = ++clock_;
    for (Entry & e : held) {
        if (std::equal(e.cont.begin(), e.cont.end(), ngram + 1)) {
            e.stamp = stamp;
            return false;
        }
    }
    Entry fresh{std::vector<int32_t>(ngram + 1, ngram + n_), stamp};
    if (static_cast<int32_t>(held.size()) < max_per_key_) {
        held.push_back(std::move(fresh));
        ++size_;
    } else {
        auto oldest = std::min_element(held.begin(), held.end(),
                                       [](const Entry & a, const Entry & b) { return a.stamp < b.stamp; });
        *oldest = std::move(fresh);
    }
    return true;
}

void NgramPool::add_stream(const int32_t * tokens, size_t len) {
    for (size_t i = 0; i + static_cast<size_t>(n_) <= len; ++i) add(tokens + i);
}

std::vector<std::vector<int32_t>> NgramPool::continuations(int32_t key, size_t limit) const {
    std::vector<std::vector<int32_t>> out;
    auto it = map_.find(key);
    if (it == map_.end() || limit == 0) return out;
    std::vector<const Entry *> order;
    order.reserve(it->second.size());
    for (const Entry & e : it->second) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](const Entry * a, const Entry * b) { return a->stamp > b->stamp; });
    for (size_t k = 0; k < order.size() && k < limit; ++k) out.push_back(order[k]->cont);
    return out;
}

void NgramPool::refresh(int32_t key, const int32_t * prefix, size_t len) {
    if (len == 0) fail("refresh needs a prefix of at least one token");
    auto it = map_.find(key);
    if (it == map_.end()) return;
    const uint64_t stamp = ++clock_;
    const size_t m = std::min(len, static_cast<size_t>(n_ - 1));
    for (Entry & e : it->second) {
        if (std::equal(prefix, prefix + m, e.cont.begin())) e.stamp = stamp;
    }
}

void NgramPool::clear() {
    map_.clear();
    size_ = 0;
    clock_ = 0;
}

// ---- JacobiWindow ---------------------------------------------------------------------

JacobiWindow::JacobiWindow(int32_t w, int32_t n) : w_(w), n_(n) {
    if (w < 1) fail("window width W = ", w, " must be >= 1");
    if (n < 3 || n > 64) fail("window n-gram length N = ", n, " must be in [3, 64]");
    cells_.assign(static_cast<size_t>(n - 1), std::vector<int32_t>(static_cast<size_t>(w), 0));
}

void JacobiWindow::reset(const std::vector<int32_t> & fill) {
    check_fill(fill);
    size_t k = 0;
    for (int32_t l = 0; l < n_ - 1; ++l) {
        for (int32_t i = 0; i < w_; ++i) {
            if (l == 0 && i == 0) continue;
            cells_[l][i] = fill[k++ % fill.size()];
        }
    }
}

void JacobiWindow::set_root(int32_t root) {
    check_token(root, "root");
    cells_[0][0] = root;
}

std::vector<int32_t> JacobiWindow::tokens() const {
    std::vector<int32_t> out;
    out.reserve(static_cast<size_t>(n_tokens()));
    for (int32_t i = 1; i < w_; ++i) out.push_back(cells_[0][i]);
    for (int32_t l = 1; l < n_ - 1; ++l) {
        for (int32_t i = 0; i < w_; ++i) out.push_back(cells_[l][i]);
    }
    return out;
}

std::vector<int32_t> JacobiWindow::offsets() const {
    std::vector<int32_t> out;
    out.reserve(static_cast<size_t>(n_tokens()));
    for (int32_t i = 1; i < w_; ++i) out.push_back(i);
    for (int32_t l = 1; l < n_ - 1; ++l) {
        for (int32_t i = 0; i < w_; ++i) out.push_back(l + i);
    }
    return out;
}

std::vector<std::vector<int32_t>> JacobiWindow::seqs() const {
    std::vector<std::vector<int32_t>> out;
    out.reserve(static_cast<size_t>(n_tokens()));
    for (int32_t i = 1; i < w_; ++i) {
        std::vector<int32_t> cols;
        for (int32_t c = i; c < w_; ++c) cols.push_back(c);  // columns i..W-1 see level-0 cell i
        out.push_back(std::move(cols));
    }
    for (int32_t l = 1; l < n_ - 1; ++l) {
        for (int32_t i = 0; i < w_; ++i) out.push_back({i});
    }
    return out;
}

std::vector<int32_t> JacobiWindow::output_rows() const {
    std::vector<int32_t> out;
    const int32_t first = (w_ - 1) + w_ * (n_ - 3);  // level N-2 starts after levels 0..N-3
    for (int32_t i = 0; i < w_; ++i) out.push_back(first + i);
    return out;
}

void JacobiWindow::advance(const std::vector<int32_t> & next, int32_t committed, const std::vector<int32_t> & fill,
                           NgramPool * pool) {
    if (static_cast<int32_t>(next.size()) != w_) fail("next has ", next.size(), " tokens, the window width is ", w_);
    if (committed < 1) fail("committed = ", committed, " must be >= 1 (a pass commits at least its next token)");
    for (int32_t t : next) check_token(t, "next");
    check_fill(fill);
    if (pool != nullptr) {
        if (pool->n() != n_) fail("the pool holds ", pool->n(), "-grams, the window makes ", n_, "-grams");
        std::vector<int32_t> gram(static_cast<size_t>(n_));
        for (int32_t f = 0; f < w_; ++f) {
            for (int32_t l = 0; l < n_ - 1; ++l) gram[l] = cells_[l][f];
            gram[n_ - 1] = next[f];
            pool->add(gram.data());
        }
    }
    for (int32_t l = 0; l + 1 < n_ - 1; ++l) cells_[l] = cells_[l + 1];
    cells_[n_ - 2] = next;
    const int32_t shift = committed - 1;
    if (shift == 0) return;
    size_t k = 0;
    for (int32_t l = 0; l < n_ - 1; ++l) {
        std::vector<int32_t> & row = cells_[l];
        for (int32_t i = 0; i < w_; ++i) row[i] = i + shift < w_ ? row[i + shift] : fill[k++ % fill.size()];
    }
}

}  // namespace pyaccel
