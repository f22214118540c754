// Bindings of cost.h: the measured CostCurve, chain_plan / tree_plan, and the decayed
// per-position AcceptanceStats that feed them.
#include "bindings_common.h"
#include "cost.h"

#include <optional>
#include <string>

using namespace pybind11::literals;

namespace pyaccel {
namespace {

std::string chain_repr(const ChainPlan & p) {
    return "ChainPlan(best_len=" + std::to_string(p.best_len) + ", expected_tokens=" +
           std::to_string(p.expected_tokens) + ", expected_speedup=" + std::to_string(p.expected_speedup) + ")";
}

}  // namespace

void bind_cost(py::module_ & m) {
    py::class_<CostCurve>(m, "CostCurve", "Measured relative time of one target decode of b = 1..B tokens.")
        .def(py::init<std::vector<double>>(), "times"_a)
        .def_static("from_points", &CostCurve::from_points, "sizes"_a, "times"_a)
        .def("cost_at", &CostCurve::cost_at, "b"_a)
        .def("efficient_sizes", &CostCurve::efficient_sizes, "max_b"_a)
        .def_property_readonly("measured", &CostCurve::measured)
        .def_property_readonly("times", [](const CostCurve & c) { return as_array(c.times()); });
    py::class_<ChainPlan>(m, "ChainPlan", "Best chain draft length on this device.")
        .def_readonly("best_len", &ChainPlan::best_len)
        .def_readonly("expected_tokens", &ChainPlan::expected_tokens)
        .def_readonly("expected_cost", &ChainPlan::expected_cost)
        .def_readonly("expected_speedup", &ChainPlan::expected_speedup)
        .def("__repr__", &chain_repr);
    m.def("chain_plan", [](const CostCurve & curve, const std::vector<double> & alpha, double draft_cost_per_token,
                           std::optional<int32_t> max_len) {
        return chain_plan(curve, alpha.data(), alpha.size(), draft_cost_per_token,
                          max_len ? *max_len : static_cast<int32_t>(alpha.size()));
    }, "curve"_a, "alpha"_a, "draft_cost_per_token"_a = 0.0, "max_len"_a = py::none());
    py::class_<TreePlan>(m, "TreePlan", "Best prefix-closed subset of a candidate tree on this device.")
        .def_property_readonly("nodes", [](const TreePlan & p) { return as_array(p.nodes); })
        .def_property_readonly("parents", [](const TreePlan & p) { return as_array(p.parents); })
        .def_readonly("expected_tokens", &TreePlan::expected_tokens)
        .def_readonly("expected_cost", &TreePlan::expected_cost)
        .def_readonly("expected_speedup", &TreePlan::expected_speedup);
    m.def("tree_plan", [](const CostCurve & curve, const std::vector<double> & path_prob, const py::object & parents,
                          std::optional<int32_t> max_nodes) {
        const std::vector<int32_t> par = int32_vector(parents, "parents");
        if (par.size() != path_prob.size()) {
            fail("path_prob and parents must have one entry per node, got " + std::to_string(path_prob.size()) +
                 " and " + std::to_string(par.size()));
        }
        const int32_t n = checked_extent(static_cast<py::ssize_t>(par.size()), "parents");
        py::gil_scoped_release nogil;
        return tree_plan(curve, path_prob.data(), par.data(), par.size(), max_nodes ? *max_nodes : n);
    }, "curve"_a, "path_prob"_a, "parents"_a, "max_nodes"_a = py::none());
    py::class_<AcceptanceStats>(m, "AcceptanceStats", "Per-position conditional acceptance, decayed, with a prior.")
        .def(py::init<int32_t, double, double, double>(), "n_positions"_a,
             "decay"_a = AcceptanceStats::kDefaultDecay, "prior_alpha"_a = AcceptanceStats::kDefaultPriorAlpha,
             "prior_weight"_a = AcceptanceStats::kDefaultPriorWeight)
        .def(py::init<std::vector<double>, double, double>(), "prior_alphas"_a,
             "decay"_a = AcceptanceStats::kDefaultDecay, "prior_weight"_a = AcceptanceStats::kDefaultPriorWeight)
        .def("observe", &AcceptanceStats::observe, "n_drafted"_a, "n_accepted"_a)
        .def("observe_position", &AcceptanceStats::observe_position, "position"_a, "accepted"_a)
        .def("alpha", [](const AcceptanceStats & s) { return as_array(s.alpha()); })
        .def("alpha_at", &AcceptanceStats::alpha_at, "position"_a, "alpha()[position] alone.")
        .def_property_readonly("n_positions", &AcceptanceStats::n_positions);
}

}  // namespace pyaccel
