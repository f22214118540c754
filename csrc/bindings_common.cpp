// Argument conversions shared by the binding files; declared in bindings_common.h.
#include "bindings_common.h"

#include <limits>
#include <string>

namespace pyaccel {

int32_t checked_extent(py::ssize_t n, const char * name) {
    if (n > std::numeric_limits<int32_t>::max()) {
        fail(std::string(name) + " is too large: each dimension must be < 2**31");
    }
    return static_cast<int32_t>(n);
}

py::array float_array(const py::object & obj, int ndim, const char * name) {
    const char * shape = ndim == 1 ? "1-D" : "2-D";
    if (!py::isinstance<py::array_t<float>>(obj)) {
        fail(std::string(name) + " must be a " + shape +
             " numpy float32 array; convert with np.ascontiguousarray(x, dtype=np.float32)");
    }
    py::array a = py::reinterpret_borrow<py::array>(obj);
    if (a.ndim() != ndim) {
        fail(std::string(name) + " must be " + shape + ", got " + std::to_string(a.ndim()) + " dimensions");
    }
    if (!(a.flags() & py::array::c_style)) {
        fail(std::string(name) + " must be C-contiguous; pass np.ascontiguousarray(x)");
    }
    return a;
}

namespace {

// The per-step inputs are int32 arrays or short lists of Python ints: copied directly.
// Anything else returns false and takes numpy's conversion (and its error messages).
bool int32_fast(const py::object & obj, std::vector<int32_t> & out) {
    if (py::isinstance<py::array_t<int32_t>>(obj)) {
        const py::array a = py::reinterpret_borrow<py::array>(obj);
        if (a.ndim() != 1 || !(a.flags() & py::array::c_style)) return false;
        const auto * data = static_cast<const int32_t *>(a.data());
        out.assign(data, data + a.shape(0));
        return true;
    }
    if (!PyList_Check(obj.ptr())) return false;
    const Py_ssize_t n = PyList_GET_SIZE(obj.ptr());
    out.resize(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject * item = PyList_GET_ITEM(obj.ptr(), i);
        if (!PyLong_CheckExact(item)) return false;
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow || v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
            return false;
        }
        out[static_cast<size_t>(i)] = static_cast<int32_t>(v);
    }
    return true;
}

}  // namespace

std::vector<int32_t> int32_vector(const py::object & obj, const char * name) {
    std::vector<int32_t> fast;
    if (int32_fast(obj, fast)) return fast;
    py::array a = py::module_::import("numpy").attr("asarray")(obj);
    if (a.ndim() != 1) {
        fail(std::string(name) + " must be a 1-D sequence of ints, got " + std::to_string(a.ndim()) + " dimensions");
    }
    const char kind = a.dtype().kind();
    if (a.size() > 0 && kind != 'i' && kind != 'u') {
        fail(std::string(name) + " must hold integers (e.g. np.int32), got dtype kind '" + std::string(1, kind) + "'");
    }
    auto wide = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    std::vector<int32_t> out(static_cast<size_t>(wide.size()));
    for (py::ssize_t i = 0; i < wide.size(); ++i) {
        const int64_t v = wide.data()[i];
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
            fail(std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(v) + " does not fit in int32");
        }
        out[i] = static_cast<int32_t>(v);
    }
    return out;
}

}  // namespace pyaccel
