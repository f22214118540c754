// Bindings of tree_merge.h: tree_merge (candidate trees -> one prefix tree) and
// tree_cap_siblings.
#include "bindings_common.h"
#include "tree_merge.h"

#include <string>

using namespace pybind11::literals;

namespace pyaccel {
namespace {

using Int32Array = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

// The arrays of one candidate, kept alive while tree_merge reads them.
struct HeldCandidate {
    Int32Array tokens;
    Int32Array parents;
    DoubleArray probs;
};

py::tuple tree_merge_py(const py::sequence & candidates, int32_t n_sources, int32_t max_leaves) {
    std::vector<HeldCandidate> held;
    std::vector<CandidateTree> views;
    held.reserve(candidates.size());
    views.reserve(candidates.size());
    for (size_t k = 0; k < candidates.size(); ++k) {
        const py::tuple c = candidates[k].cast<py::tuple>();
        if (c.size() != 5) {
            fail("tree_merge: candidate ", k, " must be (tokens, parents, probs, source, learnt), got ", c.size(),
                 " items");
        }
        held.push_back({ c[0].cast<Int32Array>(), c[1].cast<Int32Array>(), c[2].cast<DoubleArray>() });
        const HeldCandidate & h = held.back();
        if (h.tokens.ndim() != 1 || h.parents.ndim() != 1 || h.probs.ndim() != 1 ||
            h.tokens.shape(0) != h.parents.shape(0) || h.probs.shape(0) != h.parents.shape(0)) {
            fail("tree_merge: candidate ", k, " needs 1-D tokens, parents and probs of one length");
        }
        views.push_back({ h.tokens.data(), h.parents.data(), h.probs.data(), checked_extent(h.tokens.shape(0), "tokens"),
                          c[3].cast<int32_t>(), c[4].cast<bool>() });
    }
    MergedNodes m = tree_merge(views, n_sources, max_leaves);
    const py::ssize_t n = static_cast<py::ssize_t>(m.tokens.size());
    py::array_t<double> held_probs({ n, static_cast<py::ssize_t>(n_sources) });
    std::copy(m.held.begin(), m.held.end(), held_probs.mutable_data());
    py::array_t<bool> held_learnt({ n, static_cast<py::ssize_t>(n_sources) });
    std::transform(m.held_learnt.begin(), m.held_learnt.end(), held_learnt.mutable_data(),
                   [](uint8_t v) { return v != 0; });
    return py::make_tuple(as_array(m.tokens), as_array(m.parents), as_array(m.probs), as_array(m.owner), held_probs,
                          held_learnt);
}

} // namespace

void bind_tree_merge(py::module_ & m) {
    m.def("tree_merge", &tree_merge_py, "candidates"_a, "n_sources"_a, "max_leaves"_a,
          "Candidate trees [(tokens, parents, probs, source, learnt), ...], placed in the order given, merged into one "
          "prefix tree of at most max(0, max_leaves) root-to-leaf paths: (tokens, parents, probs (largest estimate), "
          "owner (its source), held[node, source] (-1: not there), held_learnt[node, source]).");
    m.def("tree_cap_siblings", [](const py::object & parents, const DoubleArray & probs) {
        const std::vector<int32_t> par = int32_vector(parents, "parents");
        if (probs.ndim() != 1 || static_cast<size_t>(probs.shape(0)) != par.size()) {
            fail("tree_cap_siblings: probs must be 1-D with one value per node (", par.size(), ")");
        }
        const int32_t n = checked_extent(static_cast<py::ssize_t>(par.size()), "parents");
        return as_array(tree_cap_siblings(par.data(), probs.data(), n));
    }, "parents"_a, "probs"_a,
          "probs with each node's children summing to at most the node's (the root's 1): the likeliest sibling keeps "
          "its value, the next get what their elders left, a cut node's subtree scaled with it.");
}

} // namespace pyaccel
