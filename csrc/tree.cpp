#include "tree.h"

#include "errors.h"

#include <string>

namespace pyaccel {

void tree_validate(const int32_t * parents, int32_t n) {
    if (n < 0) {
        fail("number of tree nodes must be >= 0");
    }
    for (int32_t i = 0; i < n; ++i) {
        const int32_t p = parents[i];
        if (p < -1 || p >= i) {
            fail("parents[" + std::to_string(i) + "] = " + std::to_string(p) +
                 ": parent index must point to an earlier node (0 <= parent < " +
                 std::to_string(i) + "), or be -1 for a child of the root");
        }
    }
}

TreeChildren tree_children_build(const int32_t * parents, int32_t n) {
    TreeChildren c;
    c.offsets.assign(n + 2, 0);
    for (int32_t i = 0; i < n; ++i) {
        ++c.offsets[parents[i] + 2];  // count of slot parents[i] + 1, stored one slot up
    }
    for (int32_t s = 1; s < n + 2; ++s) {
        c.offsets[s] += c.offsets[s - 1];
    }
    std::vector<int32_t> cursor(c.offsets.begin(), c.offsets.end() - 1);
    c.ids.assign(n, 0);
    for (int32_t i = 0; i < n; ++i) {
        c.ids[cursor[parents[i] + 1]++] = i;
    }
    return c;
}

TreeLayout tree_layout_build(const int32_t * parents, int32_t n) {
    tree_validate(parents, n);
    TreeLayout t;
    t.n_nodes = n;
    t.depth.assign(n, 1);
    std::vector<bool> has_child(n, false);
    for (int32_t i = 0; i < n; ++i) {
        if (parents[i] >= 0) {
            t.depth[i] = t.depth[parents[i]] + 1;
            has_child[parents[i]] = true;
        }
    }
    t.node_seqs.assign(n, {});
    for (int32_t leaf = 0; leaf < n; ++leaf) {
        if (has_child[leaf]) {
            continue;
        }
        const int32_t path_id = t.n_paths();
        std::vector<int32_t> path(t.depth[leaf]);
        for (int32_t v = leaf, d = t.depth[leaf] - 1; v >= 0; v = parents[v], --d) {
            path[d] = v;
            t.node_seqs[v].push_back(path_id);
        }
        t.paths.push_back(std::move(path));
    }
    if (n == 0) {
        t.paths.emplace_back();
    }
    return t;
}

int32_t tree_path_of(const int32_t * parents, int32_t n, int32_t node) {
    if (node < 0) {
        return 0;
    }
    // min_leaf[i]: lowest leaf id under node i. Children have larger ids, so a
    // descending sweep settles every child before its parent reads it.
    std::vector<bool> has_child(n, false);
    for (int32_t i = 0; i < n; ++i) {
        if (parents[i] >= 0) {
            has_child[parents[i]] = true;
        }
    }
    std::vector<int32_t> min_leaf(n, n);
    for (int32_t i = n - 1; i >= 0; --i) {
        if (!has_child[i]) {
            min_leaf[i] = i;
        }
        if (parents[i] >= 0 && min_leaf[i] < min_leaf[parents[i]]) {
            min_leaf[parents[i]] = min_leaf[i];
        }
    }
    int32_t rank = 0;
    for (int32_t i = 0; i < min_leaf[node]; ++i) {
        rank += has_child[i] ? 0 : 1;
    }
    return rank;
}

std::vector<int32_t> tree_depths(const int32_t * parents, int32_t n) {
    tree_validate(parents, n);
    std::vector<int32_t> depth(n, 1);
    for (int32_t i = 0; i < n; ++i) {
        if (parents[i] >= 0) {
            depth[i] = depth[parents[i]] + 1;
        }
    }
    return depth;
}

std::vector<double> tree_path_products(const int32_t * parents, const double * factor, int32_t n) {
    tree_validate(parents, n);
    std::vector<double> out(n);
    for (int32_t i = 0; i < n; ++i) {
        out[i] = (parents[i] >= 0 ? out[parents[i]] : 1.0) * factor[i];
    }
    return out;
}

bool tree_flagged_products(const int32_t * parents, const int64_t * positions, const double * probs, int32_t n,
                           const uint8_t * flags, int64_t n_flags, double h, int32_t n_chain,
                           std::vector<double> & out, std::vector<int32_t> & chain_flagged) {
    out.clear();
    chain_flagged.clear();
    std::vector<double> factor(static_cast<size_t>(n), 1.0);
    bool any = false;
    for (int32_t i = 0; i < n; ++i) {
        const int64_t pos = positions[i];
        if (pos >= 0 && pos < n_flags && flags[pos] != 0) {
            factor[static_cast<size_t>(i)] = h;
            any = true;
            if (i < n_chain) chain_flagged.push_back(i);
        }
    }
    if (!any) {
        tree_validate(parents, n);
        return false;
    }
    out = tree_path_products(parents, factor.data(), n);
    for (int32_t i = 0; i < n; ++i) {
        out[static_cast<size_t>(i)] *= probs[i];
    }
    return true;
}

int32_t tree_chain_length(const int32_t * parents, int32_t n) {
    int32_t k = n > 0 ? 1 : 0;
    while (k < n && parents[k] == k - 1) {
        ++k;
    }
    return k;
}

} // namespace pyaccel
