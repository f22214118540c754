#pragma once

// Shared by the binding files (bindings.cpp, bind_*.cpp), the only ones that know
// pybind11: conversions of numpy / Python arguments into views over the caller's memory
// (no copies of logits) and the per-module bind_* entry points that PYBIND11_MODULE
// calls. Caller mistakes are reported with fail() (errors.h), which throws
// std::invalid_argument; pybind11 maps that to ValueError.
//
// Every binding file includes this header, so all of them see the same type casters
// (pybind11/stl.h in one file but not another would convert the same C++ type two ways).

#include "errors.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace pyaccel {

namespace py = pybind11;

// n as an int32 extent (the core indexes rows and nodes with int32_t); larger is a
// ValueError naming `name`, never a silent wrap-around.
int32_t checked_extent(py::ssize_t n, const char * name);

// Zero-copy view of a C-contiguous float32 array with `ndim` (1 or 2) dimensions.
// Anything else is rejected rather than silently copied: these are the per-step hot
// inputs, and a copy of a tree's logits is tens of MB.
py::array float_array(const py::object & obj, int ndim, const char * name);

inline const float * float_data(const py::array & a) {
    return static_cast<const float *>(a.data());
}

// Any 1-D sequence of integers (list, tuple, numpy int array) as int32 values.
std::vector<int32_t> int32_vector(const py::object & obj, const char * name);

// A copy of v as a new 1-D numpy array (results are small: drafts, plans, statistics).
template <typename T>
py::array_t<T> as_array(const std::vector<T> & v) {
    py::array_t<T> out(static_cast<py::ssize_t>(v.size()));
    std::copy(v.begin(), v.end(), out.mutable_data());
    return out;
}

// Read/write property whose setter validates the whole struct and leaves it unchanged
// on failure, so a parameter object is never left half-updated and invalid.
template <typename T, typename F>
void def_checked(py::class_<T> & cls, const char * name, F T::* field, void (*validate)(const T &)) {
    cls.def_property(
        name, [field](const T & self) { return self.*field; },
        [field, validate](T & self, F value) {
            T next = self;
            next.*field = value;
            validate(next);
            self = next;
        });
}

// One per binding file; PYBIND11_MODULE (bindings.cpp) calls them in this order, which
// registers every class before the functions whose signatures name it.
void bind_sampling(py::module_ & m);     // bind_sampling.cpp: Rng, SamplingParams, TypicalParams, sampling
void bind_tree_verify(py::module_ & m);  // bind_tree_verify.cpp: TreeLayout, VerifyResult, verify_tree
void bind_tree_merge(py::module_ & m);   // bind_tree_merge.cpp: tree_merge, tree_cap_siblings, tree_cap
void bind_calibration(py::module_ & m);  // bind_calibration.cpp: calibrate, calibrate_tree, calibration_record
void bind_ngram(py::module_ & m);        // bind_ngram.cpp: DraftTree, NgramIndex, NgramCache, drafting
void bind_cost(py::module_ & m);         // bind_cost.cpp: CostCurve, plans, AcceptanceStats
void bind_lookahead(py::module_ & m);    // bind_lookahead.cpp: NgramPool, JacobiWindow

}  // namespace pyaccel
