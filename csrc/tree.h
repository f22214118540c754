// Draft token trees: how a tree is described, and how it maps onto one
// llama.cpp batch.
//
// A draft is a tree of n nodes under an implicit root. The root is the last
// committed token: already chosen, not yet evaluated by the target.
//
//     parents[i] == -1    node i is a child of the root
//     parents[i] == j     node i is a child of node j; j < i is required, so
//                         node order is a topological order and every node's
//                         children have larger indices than the node
//
// Example, parents = [-1, -1, 0, 0, 2] (n = 5):
//
//     root ─┬─ 0 ─┬─ 2 ── 4        depth: 1 1 2 2 3
//           │     └─ 3             leaves in index order: 1, 3, 4
//           └─ 1                   paths: [1] = path 0, [0,3] = path 1, [0,2,4] = path 2
//
// A chain of n drafted tokens is parents = [-1, 0, 1, ..., n-2]. n = 0 is a
// legal, empty draft.
//
// Batch layout: the root and nodes are evaluated in one batch,
//     [root, node 0, ..., node n-1]   at positions base, base + depth[i]
// and llama.cpp's only tree mechanism is sequence ids: a token attends to the
// cache cells of its own sequences. Path p (one per leaf) becomes sequence p;
// node i carries the ids node_seqs[i] of every path through it, and the root
// carries all ids 0 .. n_paths-1. With n = 0 there is one empty path, so
// sequence 0 always exists.
#pragma once

#include <cstdint>
#include <vector>

namespace pyaccel {

// Throws std::invalid_argument unless n >= 0 and every parents[i] is -1 or in
// [0, i). parents may be null when n == 0.
void tree_validate(const int32_t * parents, int32_t n);

struct TreeLayout {
    int32_t n_nodes = 0;
    std::vector<int32_t> depth;                  // [n]: root children have depth 1
    std::vector<std::vector<int32_t>> paths;     // [n_paths]: root-to-leaf node ids, by leaf index
    std::vector<std::vector<int32_t>> node_seqs; // [n]: ascending path ids through node i
    int32_t n_paths() const { return static_cast<int32_t>(paths.size()); }
};

// parents: n entries as described above (validated). Cost O(sum of path lengths).
TreeLayout tree_layout_build(const int32_t * parents, int32_t n);

// Children lists in compressed form. Slot 0 is the root, slot i + 1 is node i:
//     children of slot s = ids[offsets[s] .. offsets[s + 1]), ascending node ids
struct TreeChildren {
    std::vector<int32_t> offsets;  // [n + 2]
    std::vector<int32_t> ids;      // [n]
};

// parents: n validated entries.
TreeChildren tree_children_build(const int32_t * parents, int32_t n);

// Index (as in TreeLayout::paths) of the lowest path that passes through
// `node`; node == -1 (root only) gives 0. parents: n validated entries.
int32_t tree_path_of(const int32_t * parents, int32_t n, int32_t node);

// Per node, its depth (root children 1): TreeLayout::depth without the paths.
// parents: n validated entries. O(n).
std::vector<int32_t> tree_depths(const int32_t * parents, int32_t n);

// Per node i, the product of factor[j] over the nodes j on its root path, i
// included, multiplied from the root down (out[i] = out[parents[i]] * factor[i]).
// parents: n validated entries; factor: n values. O(n).
std::vector<double> tree_path_products(const int32_t * parents, const double * factor, int32_t n);

// Nodes flagged by the stream position they stand for: node i is flagged when
// 0 <= positions[i] < n_flags and flags[positions[i]] != 0. Writes out[i] = probs[i] *
// f(i), f(i) = f(parents[i]) * (h if i is flagged, else 1), f(root) = 1 (multiplied from
// the root down, as tree_path_products), and the flagged nodes among 0 .. n_chain - 1
// (ascending) to chain_flagged; returns false, leaving both empty, when no node is
// flagged. parents: n validated entries; positions, probs: n values each.
bool tree_flagged_products(const int32_t * parents, const int64_t * positions, const double * probs, int32_t n,
                           const uint8_t * flags, int64_t n_flags, double h, int32_t n_chain,
                           std::vector<double> & out, std::vector<int32_t> & chain_flagged);

// Length of the first branch: nodes 0, 1, ..., k - 1 while each node i >= 1 is
// the child of node i - 1 (0 for an empty tree). parents: n entries. O(k).
int32_t tree_chain_length(const int32_t * parents, int32_t n);

} // namespace pyaccel
