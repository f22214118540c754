#include "tree_merge.h"

#include "errors.h"
#include "tree.h"

#include <algorithm>
#include <numeric>

namespace pyaccel {
namespace {

constexpr int32_t kLeftOut = -2;  // a candidate node not placed (over the path limit, or under one that was not)

// The tree as it grows: children per slot (slot 0 the root, slot i + 1 node i).
class Builder {
  public:
    Builder(int32_t n_sources, int32_t max_leaves) : max_leaves_(std::max(0, max_leaves)) {
        out_.n_sources = n_sources;
        children_.emplace_back();
    }

    // The node for `token` under `parent` (-1: the root), created if it fits; kLeftOut
    // when a new path would exceed the limit.
    int32_t add(int32_t parent, int32_t token, double prob, int32_t source, bool learnt) {
        const int32_t ns = out_.n_sources;
        for (const int32_t node : children_[parent + 1]) {
            if (out_.tokens[node] != token) {
                continue;
            }
            const size_t at = static_cast<size_t>(node) * ns + source;
            if (prob > out_.held[at]) {
                out_.held[at] = prob;
                out_.held_learnt[at] = learnt ? 1 : 0;
            }
            if (prob > out_.probs[node]) {
                out_.probs[node] = prob;
                out_.owner[node] = source;
            }
            return node;
        }
        const bool new_leaf = parent < 0 || !children_[parent + 1].empty();
        if (new_leaf && leaves_ >= max_leaves_) {
            return kLeftOut;
        }
        leaves_ += new_leaf ? 1 : 0;
        const int32_t node = static_cast<int32_t>(out_.tokens.size());
        children_[parent + 1].push_back(node);
        children_.emplace_back();
        out_.tokens.push_back(token);
        out_.parents.push_back(parent);
        out_.probs.push_back(prob);
        out_.owner.push_back(source);
        out_.held.resize(out_.held.size() + ns, -1.0);
        out_.held_learnt.resize(out_.held_learnt.size() + ns, 0);
        out_.held[static_cast<size_t>(node) * ns + source] = prob;
        out_.held_learnt[static_cast<size_t>(node) * ns + source] = learnt ? 1 : 0;
        return node;
    }

    MergedNodes take() { return std::move(out_); }

  private:
    int32_t max_leaves_;
    int32_t leaves_ = 0;
    std::vector<std::vector<int32_t>> children_;
    MergedNodes out_;
};

void check_candidate(const CandidateTree & c, size_t k, int32_t n_sources) {
    if (c.n < 0 || (c.n > 0 && (!c.tokens || !c.parents || !c.probs))) {
        fail("tree_merge: candidate ", k, " has no arrays for its ", c.n, " nodes");
    }
    if (c.source < 0 || c.source >= n_sources) {
        fail("tree_merge: candidate ", k, " has source ", c.source, ", outside [0, ", n_sources, ")");
    }
    tree_validate(c.parents, c.n);
}

} // namespace

MergedNodes tree_merge(const std::vector<CandidateTree> & candidates, int32_t n_sources, int32_t max_leaves) {
    if (n_sources < 0) {
        fail("tree_merge: n_sources must be >= 0, got ", n_sources);
    }
    for (size_t k = 0; k < candidates.size(); ++k) {
        check_candidate(candidates[k], k, n_sources);
    }
    Builder b(n_sources, max_leaves);
    std::vector<int32_t> placed;
    for (const CandidateTree & c : candidates) {
        placed.assign(c.n, kLeftOut);
        for (int32_t i = 0; i < c.n; ++i) {
            const int32_t at = c.parents[i] < 0 ? -1 : placed[c.parents[i]];
            if (at != kLeftOut) {
                placed[i] = b.add(at, c.tokens[i], c.probs[i], c.source, c.learnt);
            }
        }
    }
    return b.take();
}

std::vector<double> tree_cap_siblings(const int32_t * parents, const double * probs, int32_t n) {
    tree_validate(parents, n);
    std::vector<double> out(probs, probs + n);
    std::vector<double> scale(n, 1.0);  // each node's value over its raw one, passed down to its subtree
    const TreeChildren ch = tree_children_build(parents, n);
    std::vector<int32_t> order;
    std::vector<double> vals;
    for (int32_t slot = 0; slot <= n; ++slot) {
        const int32_t begin = ch.offsets[slot], end = ch.offsets[slot + 1];
        if (begin == end) {
            continue;
        }
        const int32_t par = slot - 1;
        const double inherited = par < 0 ? 1.0 : scale[par];
        double left = par < 0 ? 1.0 : out[par];
        vals.assign(end - begin, 0.0);
        for (int32_t j = begin; j < end; ++j) {
            vals[j - begin] = probs[ch.ids[j]] * inherited;
        }
        order.resize(end - begin);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return vals[a] > vals[b]; });
        for (const int32_t j : order) {
            const int32_t node = ch.ids[begin + j];
            out[node] = std::min(vals[j], std::max(left, 0.0));
            scale[node] = probs[node] > 0 ? out[node] / probs[node] : 0.0;
            left -= out[node];
        }
    }
    return out;
}

std::vector<double> tree_cap(const int32_t * parents, const double * probs, int32_t n) {
    tree_validate(parents, n);
    std::vector<double> path(probs, probs + std::max(0, n));
    for (int32_t i = 0; i < n; ++i) {
        if (parents[i] >= 0 && path[i] > path[parents[i]]) {
            path[i] = path[parents[i]];
        }
    }
    return tree_cap_siblings(parents, path.data(), n);
}

} // namespace pyaccel
