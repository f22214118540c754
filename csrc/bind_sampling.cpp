// Bindings of rng.h, sampling.h and the TypicalParams of verify.h: the generator, the
// parameter structs, and argmax / probs / sample / sample_probs over one logits row.
// The row passes run with the GIL released.
#include "bindings_common.h"
#include "rng.h"
#include "sampling.h"
#include "verify.h"

#include <string>

using namespace pybind11::literals;

namespace pyaccel {
namespace {

SamplingParams make_params(float temperature, int32_t top_k, float top_p, float min_p) {
    SamplingParams p{ temperature, top_k, top_p, min_p };
    sampling_params_validate(p);
    return p;
}

py::str params_repr(const SamplingParams & p) {
    return py::str("SamplingParams(temperature={:.7g}, top_k={}, top_p={:.7g}, min_p={:.7g})")
        .format(p.temperature, p.top_k, p.top_p, p.min_p);
}

py::str typical_repr(const TypicalParams & p) {
    return py::str("TypicalParams(epsilon={:.7g}, delta={:.7g})").format(p.epsilon, p.delta);
}

py::bytes rng_state(const Rng & rng) {
    const auto s = rng.get_state();
    return py::bytes(reinterpret_cast<const char *>(s.data()), s.size());
}

void rng_set_state(Rng & rng, const py::bytes & b) {
    const std::string s = b;
    rng.set_state(reinterpret_cast<const uint8_t *>(s.data()), static_cast<int64_t>(s.size()));
}

// Any Python int (or object with __index__, e.g. np.int64), reduced mod 2**64
// so that negative and huge seeds are legal too.
uint64_t seed_bits(const py::object & seed) {
    const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(seed.ptr()));
    if (!index) {
        throw py::error_already_set();
    }
    return PyLong_AsUnsignedLongLongMask(index.ptr());
}

void bind_rng(py::module_ & m) {
    py::class_<Rng>(m, "Rng", "Seeded xoshiro256** generator owned by the caller; not thread-safe.")
        .def(py::init([](const py::object & seed) { return Rng(seed_bits(seed)); }), "seed"_a)
        .def("uniform", &Rng::uniform, "Uniform float in [0, 1).")
        .def("get_state", &rng_state, "32 bytes that set_state() restores exactly.")
        .def("set_state", &rng_set_state, "state"_a)
        .def(py::pickle([](const Rng & r) { return rng_state(r); },
                        [](const py::bytes & b) {
                            Rng r(0);
                            rng_set_state(r, b);
                            return r;
                        }));
}

void bind_params(py::module_ & m) {
    py::class_<SamplingParams> sp(m, "SamplingParams",
                                  "top_k -> top_p -> min_p -> temperature, as llama-cpp-python's default chain.");
    sp.def(py::init(&make_params), "temperature"_a = 0.0f, "top_k"_a = 0, "top_p"_a = 1.0f, "min_p"_a = 0.0f);
    def_checked(sp, "temperature", &SamplingParams::temperature, &sampling_params_validate);
    def_checked(sp, "top_k", &SamplingParams::top_k, &sampling_params_validate);
    def_checked(sp, "top_p", &SamplingParams::top_p, &sampling_params_validate);
    def_checked(sp, "min_p", &SamplingParams::min_p, &sampling_params_validate);
    sp.def("__repr__", &params_repr);

    py::class_<TypicalParams> tp(m, "TypicalParams", "Typical acceptance (lossy, Medusa): epsilon, delta.");
    tp.def(py::init([](float epsilon, float delta) {
               TypicalParams p{ epsilon, delta };
               typical_params_validate(p);
               return p;
           }),
           "epsilon"_a = 0.09f, "delta"_a = 0.3f);
    def_checked(tp, "epsilon", &TypicalParams::epsilon, &typical_params_validate);
    def_checked(tp, "delta", &TypicalParams::delta, &typical_params_validate);
    tp.def("__repr__", &typical_repr);
}

void bind_row_functions(py::module_ & m) {
    m.def("argmax", [](const py::object & logits) {
        const py::array a = float_array(logits, 1, "logits");
        const int32_t n = checked_extent(a.shape(0), "logits");
        py::gil_scoped_release nogil;
        return logits_argmax(float_data(a), n);
    }, "logits"_a);
    m.def("probs", [](const py::object & logits, const SamplingParams & params) {
        const py::array a = float_array(logits, 1, "logits");
        const int32_t n = checked_extent(a.shape(0), "logits");
        py::array_t<float> out(n);
        float * dst = out.mutable_data();
        {
            py::gil_scoped_release nogil;
            SamplingScratch scratch;
            logits_probs(float_data(a), n, params, dst, scratch);
        }
        return out;
    }, "logits"_a, "params"_a);
    m.def("sample", [](const py::object & logits, const SamplingParams & params, Rng & rng) {
        const py::array a = float_array(logits, 1, "logits");
        const int32_t n = checked_extent(a.shape(0), "logits");
        py::gil_scoped_release nogil;
        SamplingScratch scratch;
        return logits_sample(float_data(a), n, params, rng, scratch);
    }, "logits"_a, "params"_a, "rng"_a);
    m.def("sample_probs", [](const py::object & p, Rng & rng) {
        const py::array a = float_array(p, 1, "p");
        const int32_t n = checked_extent(a.shape(0), "p");
        py::gil_scoped_release nogil;
        return probs_sample(float_data(a), n, rng);
    }, "p"_a, "rng"_a);
}

} // namespace

void bind_sampling(py::module_ & m) {
    bind_rng(m);
    bind_params(m);
    bind_row_functions(m);
}

} // namespace pyaccel
