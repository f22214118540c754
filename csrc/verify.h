// Verification of a draft tree (tree.h) against the target's logits: which
// drafted tokens the target keeps, and the one token it emits after them.
//
// Row alignment. The target evaluated [root, node 0, ..., node n-1] in one
// batch, so
//     target_logits row 0      = target logits after the root
//     target_logits row i + 1  = target logits after node i
// and draft_probs, when given, is aligned the same way:
//     draft_probs row 0        = q at the root, from which the root's children were drawn
//     draft_probs row j + 1    = q at node j, from which node j's children were drawn
// Siblings are drawn from q WITHOUT replacement (Sequoia). No draft_probs means
// a deterministic draft (n-gram, lookahead, Medusa top-k): q is one-hot on each
// child. q must come from probs() with the same SamplingParams as p.
//
// Rules (children are always tried in ascending node index):
//   greedy    temperature == 0: from the root, move to the first child whose
//             token is the argmax of the current row (ties: lowest token id);
//             stop when none; next_token = argmax of the current row.
//   lossless  temperature > 0, typical == null: multi-draft recursive rejection
//             sampling (SpecInfer; Sequoia's without-replacement variant). At a
//             node with p = probs(row) and q: child x is accepted with
//             probability min(1, p(x) / q(x)); on rejection
//                 p <- norm(max(0, p - q)),  q <- norm(q with q(x) = 0)
//             (one-hot q: p(x) <- 0, renormalise). When every child is rejected,
//             or there are none, next_token ~ p. The emitted tokens are then
//             distributed exactly as the target would sample them.
//               A child whose q(x) is 0 at its turn (e.g. a duplicate sibling)
//             could not have been drawn and is skipped. If a residual has no
//             mass left (p == q to float precision, where rejection has
//             probability ~0), p is left as it was before that rejection.
//   typical   temperature > 0, typical != null (lossy, opt-in; Medusa): child x
//             of a node with p = probs(row) is acceptable if
//                 p(x) > min(epsilon, delta * exp(-H(p)))     (H in nats)
//             The kept path is the deepest chain of acceptable nodes; among
//             equally deep ones the lexicographically smallest sequence of node
//             ids. next_token ~ p at its last node. draft_probs is not used.
//             With temperature == 0 the greedy rule applies.
//
// Only rows on the way are read (and checked for NaN / inf): greedy and
// lossless read the rows of the accepted path plus the root; typical also
// reads the rows of acceptable nodes that have children.
#pragma once

#include "rng.h"
#include "sampling.h"

#include <cstdint>
#include <vector>

namespace pyaccel {

struct TypicalParams {
    float epsilon = 0.09f;  // in [0, 1]: hard acceptance threshold on p(x)
    float delta   = 0.3f;   // >= 0: scale of the entropy-dependent threshold
};

// Throws std::invalid_argument naming the bad field and its legal range.
void typical_params_validate(const TypicalParams & params);

// Contiguous row-major [n_rows, n_cols] floats (a zero-copy view of llama.cpp's
// logits buffer, or of the caller's draft distributions).
struct RowsView {
    const float * data;
    int32_t n_rows;
    int32_t n_cols;
    const float * row(int32_t r) const { return data + static_cast<int64_t>(r) * n_cols; }
};

// tokens[i]: token id of node i, in [0, n_vocab). parents: see tree.h.
struct DraftTreeView {
    const int32_t * tokens;
    const int32_t * parents;
    int32_t n_nodes;
};

struct VerifyResult {
    std::vector<int32_t> accepted;  // node ids along the kept root-to-leaf path, in order
    int32_t next_token = -1;        // token emitted after the last accepted node
    int32_t path = 0;               // lowest path id (tree_layout_build) containing `accepted`
};

// target_logits: [n_nodes + 1, n_vocab], n_vocab > 0. draft_probs: null or
// [n_nodes + 1, n_vocab], rows that are read must be finite, >= 0 and sum to 1
// (kProbsSumTolerance). typical: null for the exact rules. rng is used only
// when temperature > 0. Caller mistakes (shapes, parents, token ids, NaN / inf
// in a read row, invalid params) throw std::invalid_argument.
VerifyResult tree_verify(const RowsView & target_logits, const DraftTreeView & tree, const SamplingParams & params,
                         Rng & rng, const RowsView * draft_probs, const TypicalParams * typical);

} // namespace pyaccel
