// Bindings of tree.h and verify.h: TreeLayout / tree_layout, and verify_tree, which reads
// the target logits (and draft probabilities) in place and runs with the GIL released.
#include "bindings_common.h"
#include "tree.h"
#include "verify.h"

#include <optional>
#include <string>

using namespace pybind11::literals;

namespace pyaccel {
namespace {

RowsView rows_view(const py::array & a, const char * name) {
    return RowsView{ float_data(a), checked_extent(a.shape(0), name), checked_extent(a.shape(1), name) };
}

void bind_tree(py::module_ & m) {
    py::class_<TreeLayout>(m, "TreeLayout", "Per-node depth, root-to-leaf paths and sequence ids of a draft tree.")
        .def_readonly("n_nodes", &TreeLayout::n_nodes)
        // Declared as returning a plain object: its Python signature says `-> object`.
        .def_property_readonly("depth", [](const TreeLayout & t) -> py::object { return as_array(t.depth); })
        .def_readonly("paths", &TreeLayout::paths)
        .def_readonly("node_seqs", &TreeLayout::node_seqs)
        .def_property_readonly("n_paths", &TreeLayout::n_paths);
    m.def("tree_layout", [](const py::object & parents) {
        const std::vector<int32_t> par = int32_vector(parents, "parents");
        const int32_t n = checked_extent(static_cast<py::ssize_t>(par.size()), "parents");
        py::gil_scoped_release nogil;
        return tree_layout_build(par.data(), n);
    }, "parents"_a);
}

std::string result_repr(const VerifyResult & r) {
    std::string s = "VerifyResult(accepted=[";
    for (size_t i = 0; i < r.accepted.size(); ++i) {
        s += (i ? ", " : "") + std::to_string(r.accepted[i]);
    }
    return s + "], next_token=" + std::to_string(r.next_token) + ", path=" + std::to_string(r.path) + ")";
}

VerifyResult verify_tree_py(const py::object & target_logits, const py::object & tokens, const py::object & parents,
                            const SamplingParams & params, Rng & rng, const py::object & draft_probs,
                            const std::optional<TypicalParams> & typical) {
    const py::array logits = float_array(target_logits, 2, "target_logits");
    const std::vector<int32_t> tok = int32_vector(tokens, "tokens");
    const std::vector<int32_t> par = int32_vector(parents, "parents");
    if (tok.size() != par.size()) {
        fail("tokens and parents must have the same length (one entry per node), got " + std::to_string(tok.size()) +
             " and " + std::to_string(par.size()));
    }
    py::array q_arr;
    if (!draft_probs.is_none()) {
        q_arr = float_array(draft_probs, 2, "draft_probs");
    }
    const RowsView target = rows_view(logits, "target_logits");
    const RowsView q = draft_probs.is_none() ? RowsView{ nullptr, 0, 0 } : rows_view(q_arr, "draft_probs");
    const DraftTreeView tree{ tok.data(), par.data(), checked_extent(static_cast<py::ssize_t>(tok.size()), "tokens") };
    py::gil_scoped_release nogil;
    return tree_verify(target, tree, params, rng, draft_probs.is_none() ? nullptr : &q,
                       typical ? &*typical : nullptr);
}

void bind_verify(py::module_ & m) {
    py::class_<VerifyResult>(m, "VerifyResult", "Outcome of verify_tree.")
        .def_readonly("accepted", &VerifyResult::accepted)
        .def_readonly("next_token", &VerifyResult::next_token)
        .def_readonly("path", &VerifyResult::path)
        .def("__repr__", &result_repr);
    m.def("verify_tree", &verify_tree_py, "target_logits"_a, "tokens"_a, "parents"_a, "params"_a, "rng"_a,
          "draft_probs"_a = py::none(), "typical"_a = py::none());
}

} // namespace

void bind_tree_verify(py::module_ & m) {
    bind_tree(m);
    bind_verify(m);
}

} // namespace pyaccel
