// Bindings of calibration.h: calibrate, calibrate_tree and calibration_record.
#include "bindings_common.h"
#include "calibration.h"

using namespace pybind11::literals;

namespace pyaccel {
namespace {

using Int32Array = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using Int64Array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
using FlagArray = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;
using Table = py::array_t<double, py::array::c_style>;  // written in place: never a converted copy

// `edges` and `table` (n_rows x (n_edges + 1)) as a BandTable, checked.
BandTable band_table(const DoubleArray & edges, const Table & table, const char * name) {
    if (edges.ndim() != 1) {
        fail(name, ": edges must be 1-D");
    }
    const int32_t n_edges = checked_extent(edges.shape(0), "edges");
    if (table.ndim() != 2 || table.shape(1) != n_edges + 1) {
        fail(name, ": the table must be 2-D with ", n_edges + 1, " bands (one more than the edges)");
    }
    return { edges.data(), n_edges, table.data(), checked_extent(table.shape(0), "table rows") };
}

void check_1d(const py::array & a, py::ssize_t n, const char * what, const char * name) {
    if (a.ndim() != 1 || a.shape(0) != n) {
        fail(name, ": ", what, " must be 1-D with ", n, " entries");
    }
}

py::array_t<double> calibrate_py(const DoubleArray & probs, const Int32Array & rows, const FlagArray & keep,
                                 const Table & table, const DoubleArray & edges) {
    const BandTable t = band_table(edges, table, "calibrate");
    if (probs.ndim() != 1) {
        fail("calibrate: probs must be 1-D");
    }
    check_1d(rows, probs.shape(0), "rows", "calibrate");
    check_1d(keep, probs.shape(0), "keep", "calibrate");
    const int32_t n = checked_extent(probs.shape(0), "probs");
    return as_array(calibrate(t, probs.data(), rows.data(), keep.data(), n));
}

py::array_t<double> calibrate_tree_py(const DoubleArray & path_probs, const py::object & parents,
                                      const Int32Array & owner, const FlagArray & learnt,
                                      const Int32Array & source_rows, const Table & table, const DoubleArray & edges) {
    const BandTable t = band_table(edges, table, "calibrate_tree");
    const std::vector<int32_t> par = int32_vector(parents, "parents");
    const auto n = static_cast<py::ssize_t>(par.size());
    check_1d(path_probs, n, "path_probs", "calibrate_tree");
    check_1d(owner, n, "owner", "calibrate_tree");
    check_1d(learnt, n, "learnt", "calibrate_tree");
    if (source_rows.ndim() != 1) {
        fail("calibrate_tree: source_rows must be 1-D");
    }
    return as_array(calibrate_tree(t, path_probs.data(), par.data(), owner.data(), learnt.data(),
                                   checked_extent(n, "parents"), source_rows.data(),
                                   checked_extent(source_rows.shape(0), "source_rows")));
}

void record_py(Table & predicted, Table & accepted, const DoubleArray & edges, const DoubleArray & path_probs,
               const DoubleArray & held, const FlagArray & held_learnt, const Int32Array & source_rows,
               const Int64Array & verified, const Int64Array & accepted_nodes, double scale) {
    const BandTable bands = band_table(edges, predicted, "calibration_record");
    if (accepted.ndim() != 2 || accepted.shape(0) != predicted.shape(0) || accepted.shape(1) != predicted.shape(1)) {
        fail("calibration_record: predicted and accepted must have one shape");
    }
    if (!predicted.writeable() || !accepted.writeable()) {
        fail("calibration_record: predicted and accepted must be writeable");
    }
    if (path_probs.ndim() != 1 || source_rows.ndim() != 1) {
        fail("calibration_record: path_probs and source_rows must be 1-D");
    }
    const py::ssize_t n = path_probs.shape(0), s = source_rows.shape(0);
    if (held.ndim() != 2 || held.shape(0) != n || held.shape(1) != s || held_learnt.ndim() != 2 ||
        held_learnt.shape(0) != n || held_learnt.shape(1) != s) {
        fail("calibration_record: held and held_learnt must be (nodes, sources) = (", n, ", ", s, ")");
    }
    if (verified.ndim() != 1 || accepted_nodes.ndim() != 1) {
        fail("calibration_record: verified and accepted nodes must be 1-D");
    }
    if (!(scale > 0.0)) {
        fail("calibration_record: scale must be > 0, got ", scale);
    }
    Record record{ predicted.mutable_data(), accepted.mutable_data(), bands.n_rows };
    calibration_record(bands, record, path_probs.data(), held.data(), held_learnt.data(), checked_extent(n, "nodes"),
                       checked_extent(s, "sources"), source_rows.data(), verified.data(),
                       checked_extent(verified.shape(0), "verified"), accepted_nodes.data(),
                       checked_extent(accepted_nodes.shape(0), "accepted"), scale);
}

} // namespace

void bind_calibration(py::module_ & m) {
    m.def("calibrate", &calibrate_py, "probs"_a, "rows"_a, "keep"_a, "table"_a.noconvert(), "edges"_a,
          "Estimates rescaled by a calibration table (rows x bands): probs[i] where keep[i], else "
          "min(1, probs[i] * table[rows[i], band]), band = the number of edges <= probs[i].");
    m.def("calibrate_tree", &calibrate_tree_py, "path_probs"_a, "parents"_a, "owner"_a, "learnt"_a, "source_rows"_a,
          "table"_a.noconvert(), "edges"_a,
          "A merged tree's estimates rescaled as by calibrate (node i in row source_rows[owner[i]], unless learnt[i]), "
          "then tree_cap.");
    m.def("calibration_record", &record_py, "predicted"_a.noconvert(), "accepted"_a.noconvert(), "edges"_a,
          "path_probs"_a, "held"_a, "held_learnt"_a, "source_rows"_a, "verified"_a, "accepted_nodes"_a, "scale"_a,
          "Verified tree nodes added in place to the record (rows x bands): per verified node and source s holding a "
          "non-learnt estimate, min(held, path_prob) / scale to predicted[source_rows[s], band] and, where the node "
          "is accepted, 1 / scale to accepted there.");
}

} // namespace pyaccel
