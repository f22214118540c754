// Bindings of lookahead.h: NgramPool and JacobiWindow (the state of lookahead decoding).
#include "bindings_common.h"
#include "lookahead.h"

#include <string>

using namespace pybind11::literals;

namespace pyaccel {
namespace {

std::vector<int32_t> ngram_of(const NgramPool & pool, const py::object & obj) {
    std::vector<int32_t> gram = int32_vector(obj, "ngram");
    if (static_cast<int32_t>(gram.size()) != pool.n()) {
        fail("the pool holds ", pool.n(), "-grams, got ", gram.size(), " tokens");
    }
    return gram;
}

void bind_pool(py::module_ & m) {
    py::class_<NgramPool>(m, "NgramPool", "Lookahead n-gram pool: at most max_per_key n-grams per first token.")
        .def(py::init<int32_t, int32_t>(), "n"_a, "max_per_key"_a)
        .def("add", [](NgramPool & self, const py::object & ngram) {
            const std::vector<int32_t> gram = ngram_of(self, ngram);
            return self.add(gram.data());
        }, "ngram"_a)
        .def("add_stream", [](NgramPool & self, const py::object & tokens) {
            const std::vector<int32_t> tok = int32_vector(tokens, "tokens");
            py::gil_scoped_release nogil;
            self.add_stream(tok.data(), tok.size());
        }, "tokens"_a)
        .def("continuations", &NgramPool::continuations, "key"_a, "limit"_a)
        .def("refresh", [](NgramPool & self, int32_t key, const py::object & prefix) {
            const std::vector<int32_t> p = int32_vector(prefix, "prefix");
            self.refresh(key, p.data(), p.size());
        }, "key"_a, "prefix"_a)
        .def("clear", &NgramPool::clear)
        .def("__len__", &NgramPool::size)
        .def_property_readonly("n", &NgramPool::n)
        .def_property_readonly("max_per_key", &NgramPool::max_per_key)
        .def_property_readonly("n_keys", &NgramPool::n_keys)
        .def("__repr__", [](const NgramPool & p) {
            return "NgramPool(n=" + std::to_string(p.n()) + ", max_per_key=" + std::to_string(p.max_per_key()) +
                   ", size=" + std::to_string(p.size()) + ")";
        });
}

void bind_window(py::module_ & m) {
    py::class_<JacobiWindow>(m, "JacobiWindow", "Lookahead's Jacobi window: W columns x (N - 1) levels.")
        .def(py::init<int32_t, int32_t>(), "width"_a, "ngram"_a)
        .def_property_readonly("width", &JacobiWindow::width)
        .def_property_readonly("ngram", &JacobiWindow::ngram)
        .def_property_readonly("n_tokens", &JacobiWindow::n_tokens)
        .def("reset", [](JacobiWindow & self, const py::object & fill) {
            self.reset(int32_vector(fill, "fill"));
        }, "fill"_a)
        .def("set_root", &JacobiWindow::set_root, "root"_a)
        .def("tokens", [](const JacobiWindow & self) { return as_array(self.tokens()); })
        .def("offsets", [](const JacobiWindow & self) { return as_array(self.offsets()); })
        .def("seqs", &JacobiWindow::seqs)
        .def("output_rows", [](const JacobiWindow & self) { return as_array(self.output_rows()); })
        .def("advance", [](JacobiWindow & self, const py::object & next, int32_t committed, const py::object & fill,
                           NgramPool * pool) {
            self.advance(int32_vector(next, "next"), committed, int32_vector(fill, "fill"), pool);
        }, "next"_a, "committed"_a, "fill"_a, "pool"_a.none(true))
        .def("cells", [](const JacobiWindow & self) { return self.cells(); });
}

}  // namespace

void bind_lookahead(py::module_ & m) {
    bind_pool(m);
    bind_window(m);
}

}  // namespace pyaccel
