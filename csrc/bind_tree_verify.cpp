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
    m.def("tree_depths", [](const py::object & parents) {
        const std::vector<int32_t> par = int32_vector(parents, "parents");
        return as_array(tree_depths(par.data(), checked_extent(static_cast<py::ssize_t>(par.size()), "parents")));
    }, "parents"_a, "Per node, its depth (root children 1): tree_layout(parents).depth without the paths.");
    m.def("tree_path_products", [](const py::object & parents,
                                   const py::array_t<double, py::array::c_style | py::array::forcecast> & factor) {
        const std::vector<int32_t> par = int32_vector(parents, "parents");
        if (factor.ndim() != 1 || static_cast<size_t>(factor.shape(0)) != par.size()) {
            fail("tree_path_products: factor must be 1-D with one value per node (" + std::to_string(par.size()) +
                 "), got " + std::to_string(factor.ndim() == 1 ? factor.shape(0) : -1));
        }
        const int32_t n = checked_extent(static_cast<py::ssize_t>(par.size()), "parents");
        return as_array(tree_path_products(par.data(), factor.data(), n));
    }, "parents"_a, "factor"_a,
          "Per node, the product of factor over its root path, itself included (out[i] = out[parent] * factor[i]).");
    m.def("tree_flagged_products", [](const py::object & parents,
                                      const py::array_t<int64_t, py::array::c_style | py::array::forcecast> & positions,
                                      const py::array_t<double, py::array::c_style | py::array::forcecast> & probs,
                                      const py::array_t<bool, py::array::c_style | py::array::forcecast> & flags,
                                      double h, int32_t n_chain) -> py::object {
        const std::vector<int32_t> par = int32_vector(parents, "parents");
        if (positions.ndim() != 1 || probs.ndim() != 1 || flags.ndim() != 1 ||
            static_cast<size_t>(positions.shape(0)) != par.size() || static_cast<size_t>(probs.shape(0)) != par.size()) {
            fail("tree_flagged_products: positions and probs must be 1-D with one value per node (" +
                 std::to_string(par.size()) + "), flags 1-D");
        }
        std::vector<double> out;
        std::vector<int32_t> chain_flagged;
        const int32_t n = checked_extent(static_cast<py::ssize_t>(par.size()), "parents");
        if (!tree_flagged_products(par.data(), positions.data(), probs.data(), n,
                                   reinterpret_cast<const uint8_t *>(flags.data()), flags.shape(0), h, n_chain, out,
                                   chain_flagged)) {
            return py::none();
        }
        return py::make_tuple(as_array(out), py::cast(chain_flagged));
    }, "parents"_a, "positions"_a, "probs"_a, "flags"_a, "h"_a, "n_chain"_a,
          "(probs times h for every node flagged by flags[positions[j]] on each root path, the flagged nodes among "
          "the first n_chain), or None when no node is flagged.");
    m.def("tree_chain_length", [](const py::object & parents) {
        const std::vector<int32_t> par = int32_vector(parents, "parents");
        return tree_chain_length(par.data(), checked_extent(static_cast<py::ssize_t>(par.size()), "parents"));
    }, "parents"_a, "Length of a tree's first branch: nodes 0, 1, ... while each is its predecessor's child.");
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
