// Candidate draft trees from several proposers merged into one prefix tree, and the
// sibling cap that keeps a tree's acceptance estimates consistent. Trees are described
// as in tree.h (parents[i] in [-1, i)); estimates are P(node accepted), not conditional
// on the parent.
#pragma once

#include <cstdint>
#include <vector>

namespace pyaccel {

// One candidate tree: n nodes, tokens[i] under parents[i] with estimate probs[i],
// offered by source `source` (0 <= source < n_sources); `learnt` flags estimates the
// caller takes as they are (carried into held_learnt).
struct CandidateTree {
    const int32_t * tokens = nullptr;
    const int32_t * parents = nullptr;
    const double * probs = nullptr;
    int32_t n = 0;
    int32_t source = 0;
    bool learnt = false;
};

// The merged tree: node i holds tokens[i] under parents[i] (parents[i] < i), with
// probs[i] the largest estimate any candidate gave it and owner[i] the source of the
// first candidate (in the order given) that gave that largest one. held[i * n_sources + s]
// is source s's largest estimate of node i (-1 where s did not put it there) and
// held_learnt[i * n_sources + s] whether the first candidate of s to give that estimate
// was learnt.
struct MergedNodes {
    int32_t n_sources = 0;
    std::vector<int32_t> tokens;
    std::vector<int32_t> parents;
    std::vector<double> probs;
    std::vector<int32_t> owner;
    std::vector<double> held;
    std::vector<uint8_t> held_learnt;
};

// Places the candidates' nodes in the order given (the caller orders them, e.g. by
// expected tokens), each node of a candidate in its own node order. A node is keyed by
// (merged parent, token): a token already placed at the same place is that node, and
// its estimates are updated (only a strictly larger estimate replaces one). A new node
// that would start one more root-to-leaf path (a child of the root, or of a node that
// already has a child) is left out, with its whole subtree within that candidate, once
// max(0, max_leaves) paths exist. New nodes get ids in creation order.
// Throws std::invalid_argument on a candidate whose parents are not a tree (tree_validate),
// whose source is outside [0, n_sources), or with null arrays and n > 0.
MergedNodes tree_merge(const std::vector<CandidateTree> & candidates, int32_t n_sources, int32_t max_leaves);

// probs with every node's children summing to at most the node's value (the root's: 1).
// Siblings are taken likeliest first (by value after their parent's scaling; ties in
// node order); each gets min(its scaled value, max(what its elder siblings left, 0)). A
// node cut from its raw value p to p' scales its subtree by p' / p (0 where p <= 0).
// Nodes are processed parent before children, so a node's own value is final before
// its children are capped. parents: n entries, validated. O(n log n).
std::vector<double> tree_cap_siblings(const int32_t * parents, const double * probs, int32_t n);

// probs made consistent as acceptance estimates: first every node at most its parent's
// value (parents before children, so a node's value is the least along its path), then
// tree_cap_siblings of that. parents: n entries, validated.
std::vector<double> tree_cap(const int32_t * parents, const double * probs, int32_t n);

} // namespace pyaccel
