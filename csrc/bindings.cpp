// pyaccel._core: the only file that knows pybind11. Converts numpy / Python
// arguments into views over the caller's memory (no copies of logits), runs
// the pure C++ functions with the GIL released, and maps caller mistakes
// (std::invalid_argument) to ValueError.
#include "cost.h"
#include "ngram.h"
#include "rng.h"
#include "sampling.h"
#include "tree.h"
#include "verify.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace pybind11::literals;

namespace pyaccel {
namespace {

[[noreturn]] void fail(const std::string & msg) {
    throw std::invalid_argument(msg);
}

int32_t checked_extent(py::ssize_t n, const char * name) {
    if (n > std::numeric_limits<int32_t>::max()) {
        fail(std::string(name) + " is too large: each dimension must be < 2**31");
    }
    return static_cast<int32_t>(n);
}

// Zero-copy view of a C-contiguous float32 array with `ndim` dimensions.
// Anything else is rejected rather than silently copied: these are the
// per-step hot inputs, and a copy of a tree's logits is tens of MB.
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

const float * float_data(const py::array & a) {
    return static_cast<const float *>(a.data());
}

RowsView rows_view(const py::array & a, const char * name) {
    return RowsView{ float_data(a), checked_extent(a.shape(0), name), checked_extent(a.shape(1), name) };
}

// Any 1-D sequence of integers (list, tuple, numpy int array) as int32 values.
std::vector<int32_t> int32_vector(const py::object & obj, const char * name) {
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

SamplingParams make_params(float temperature, int32_t top_k, float top_p, float min_p) {
    SamplingParams p{ temperature, top_k, top_p, min_p };
    sampling_params_validate(p);
    return p;
}

// Setter that validates the whole struct and leaves it unchanged on failure.
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

void bind_sampling(py::module_ & m) {
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

py::object layout_depth(const TreeLayout & t) {
    py::array_t<int32_t> out(static_cast<py::ssize_t>(t.depth.size()));
    std::copy(t.depth.begin(), t.depth.end(), out.mutable_data());
    return std::move(out);
}

void bind_tree(py::module_ & m) {
    py::class_<TreeLayout>(m, "TreeLayout", "Per-node depth, root-to-leaf paths and sequence ids of a draft tree.")
        .def_readonly("n_nodes", &TreeLayout::n_nodes)
        .def_property_readonly("depth", &layout_depth)
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
} // namespace pyaccel

// ---- other modules: n-gram drafting and the cost model (ngram.h, cost.h) ----
namespace pyaccel {
namespace {

template <typename T>
py::array_t<T> as_array(const std::vector<T> & v) {
    py::array_t<T> out(static_cast<py::ssize_t>(v.size()));
    std::copy(v.begin(), v.end(), out.mutable_data());
    return out;
}

// str or os.PathLike, as open() takes.
std::string path_string(const py::object & path) {
    return py::module_::import("os").attr("fspath")(path).cast<std::string>();
}

// Python ints for lengths and offsets: a negative one is a caller mistake (ValueError).
size_t non_negative(int64_t v, const char * name) {
    if (v < 0) fail(std::string(name) + " = " + std::to_string(v) + " must be >= 0");
    return static_cast<size_t>(v);
}

std::string tree_repr(const DraftTree & t) {
    return "DraftTree(n_nodes=" + std::to_string(t.tokens.size()) + ", match_len=" +
           std::to_string(t.match_len) + ", n_occurrences=" + std::to_string(t.n_occurrences) + ")";
}

void bind_ngram_index(py::module_ & m) {
    py::class_<DraftTree>(m, "DraftTree", "A draft tree: node i holds tokens[i], under parents[i] (-1 = root).")
        .def_property_readonly("tokens", [](const DraftTree & t) { return as_array(t.tokens); })
        .def_property_readonly("parents", [](const DraftTree & t) { return as_array(t.parents); })
        .def_property_readonly("counts", [](const DraftTree & t) { return as_array(t.counts); })
        .def_property_readonly("contexts", [](const DraftTree & t) { return as_array(t.contexts); })
        .def_property_readonly("sources", [](const DraftTree & t) { return as_array(t.sources); })
        .def_readonly("match_len", &DraftTree::match_len)
        .def_readonly("n_occurrences", &DraftTree::n_occurrences)
        .def("__len__", [](const DraftTree & t) { return t.tokens.size(); })
        .def("__repr__", &tree_repr);
    py::class_<NgramIndex>(m, "NgramIndex", "Prompt-lookup index over one token stream; not thread-safe.")
        .def(py::init<int32_t, int32_t>(), "n_min"_a = NgramIndex::kDefaultNMin, "n_max"_a = NgramIndex::kDefaultNMax)
        .def("append", [](NgramIndex & self, const py::object & tokens) {
            const std::vector<int32_t> tok = int32_vector(tokens, "tokens");
            py::gil_scoped_release nogil;
            self.append(tok.data(), tok.size());
        }, "tokens"_a)
        .def("truncate", [](NgramIndex & self, int64_t n) {
            const size_t keep = non_negative(n, "n");
            py::gil_scoped_release nogil;
            self.truncate(keep);
        }, "n"_a)
        .def("lookup", [](const NgramIndex & self, int32_t n_min, int32_t n_max, int32_t max_len, int32_t max_cand,
                          int32_t context_cap) {
            py::gil_scoped_release nogil;
            return self.lookup(n_min, n_max, max_len, max_cand, context_cap);
        }, "n_min"_a, "n_max"_a, "max_len"_a, "max_candidates"_a = 1, "context_cap"_a = 0)
        .def("chain", [](const NgramIndex & self, int32_t n_min, int32_t n_max, int32_t max_len, int32_t context_cap) {
            py::gil_scoped_release nogil;
            return self.lookup(n_min, n_max, max_len, 1, context_cap);
        }, "n_min"_a, "n_max"_a, "max_len"_a, "context_cap"_a = 0)
        .def("tokens", [](const NgramIndex & self) { return as_array(self.tokens()); })
        .def("size", &NgramIndex::size)
        .def("__len__", &NgramIndex::size)
        .def_property_readonly("n_min", &NgramIndex::n_min)
        .def_property_readonly("n_max", &NgramIndex::n_max);
}

void bind_ngram_cache(py::module_ & m) {
    py::class_<NgramCache>(m, "NgramCache", "n-gram -> next-token counts (llama.cpp ngram-cache); not thread-safe.")
        .def(py::init<int32_t, int32_t>(), "n_min"_a = NgramCache::kDefaultNMin, "n_max"_a = kNgramCacheMaxN)
        .def("update", [](NgramCache & self, const py::object & tokens, int64_t start) {
            const std::vector<int32_t> tok = int32_vector(tokens, "tokens");
            const size_t from = non_negative(start, "start");
            py::gil_scoped_release nogil;
            self.update(tok.data(), tok.size(), from);
        }, "tokens"_a, "start"_a = 0)
        .def("merge", [](NgramCache & self, const NgramCache & other) {
            py::gil_scoped_release nogil;
            self.merge(other);
        }, "other"_a)
        .def("save", [](const NgramCache & self, const py::object & path) {
            const std::string p = path_string(path);
            py::gil_scoped_release nogil;
            self.save(p);
        }, "path"_a)
        .def_static("load", [](const py::object & path) {
            const std::string p = path_string(path);
            py::gil_scoped_release nogil;
            return NgramCache::load(p);
        }, "path"_a)
        .def("counts", [](const NgramCache & self, const py::object & ngram) {
            const std::vector<int32_t> key = int32_vector(ngram, "ngram");
            const NgramFollowers * followers = self.find(key.data(), key.size());
            py::dict out;
            if (followers != nullptr) {
                for (const TokenCount & f : *followers) out[py::int_(f.token)] = py::int_(f.count);
            }
            return out;
        }, "ngram"_a)
        .def("__len__", &NgramCache::size)
        .def_property_readonly("n_min", &NgramCache::n_min)
        .def_property_readonly("n_max", &NgramCache::n_max);
}

void bind_ngram_draft(py::module_ & m) {
    using Th = NgramDraftThresholds;
    const Th defaults;
    py::class_<Th> th(m, "NgramDraftThresholds", "Minimum evidence per n (index n-1) before a cache drafts a token.");
    th.def(py::init([](const Th::Table & cs, const Th::Table & cp, const Th::Table & ds, const Th::Table & dp,
                       int32_t sn, int32_t ss, int32_t sp, int32_t sw) {
               Th t{cs, cp, ds, dp, sn, ss, sp, sw};
               ngram_thresholds_check(t);
               return t;
           }),
           "context_min_samples"_a = defaults.context_min_samples,
           "context_min_percent"_a = defaults.context_min_percent,
           "dynamic_min_samples"_a = defaults.dynamic_min_samples,
           "dynamic_min_percent"_a = defaults.dynamic_min_percent,
           "static_n"_a = defaults.static_n, "static_min_samples"_a = defaults.static_min_samples,
           "static_min_percent"_a = defaults.static_min_percent, "static_weight"_a = defaults.static_weight);
    def_checked(th, "context_min_samples", &Th::context_min_samples, &ngram_thresholds_check);
    def_checked(th, "context_min_percent", &Th::context_min_percent, &ngram_thresholds_check);
    def_checked(th, "dynamic_min_samples", &Th::dynamic_min_samples, &ngram_thresholds_check);
    def_checked(th, "dynamic_min_percent", &Th::dynamic_min_percent, &ngram_thresholds_check);
    def_checked(th, "static_n", &Th::static_n, &ngram_thresholds_check);
    def_checked(th, "static_min_samples", &Th::static_min_samples, &ngram_thresholds_check);
    def_checked(th, "static_min_percent", &Th::static_min_percent, &ngram_thresholds_check);
    def_checked(th, "static_weight", &Th::static_weight, &ngram_thresholds_check);
    m.def("ngram_cache_draft", [](const py::object & context_tokens, const NgramCache & context_cache,
                                  const NgramCache & dynamic_cache, const NgramCache * static_cache, int32_t n_draft,
                                  const std::optional<Th> & thresholds) {
        const std::vector<int32_t> ctx = int32_vector(context_tokens, "context_tokens");
        std::vector<int32_t> draft;
        {
            py::gil_scoped_release nogil;
            draft = ngram_cache_draft(ctx.data(), ctx.size(), context_cache, dynamic_cache, static_cache, n_draft,
                                      thresholds ? *thresholds : Th{});
        }
        return as_array(draft);
    }, "context_tokens"_a, "context_cache"_a, "dynamic_cache"_a, "static_cache"_a.none(true), "n_draft"_a,
       "thresholds"_a = py::none());
}

std::string chain_repr(const ChainPlan & p) {
    return "ChainPlan(best_len=" + std::to_string(p.best_len) + ", expected_tokens=" +
           std::to_string(p.expected_tokens) + ", expected_speedup=" + std::to_string(p.expected_speedup) + ")";
}

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
        .def_property_readonly("n_positions", &AcceptanceStats::n_positions);
}

} // namespace
} // namespace pyaccel

PYBIND11_MODULE(_core, m) {
    m.doc() = "pyaccel's C++ core: sampling transforms, tree layout and draft verification.";
    pyaccel::bind_rng(m);
    pyaccel::bind_params(m);
    pyaccel::bind_sampling(m);
    pyaccel::bind_tree(m);
    pyaccel::bind_verify(m);

    // ---- other modules ----
    // n-gram caches, cost model, ...: their bindings go below, one bind_* call each.
    pyaccel::bind_ngram_index(m);
    pyaccel::bind_ngram_cache(m);
    pyaccel::bind_ngram_draft(m);
    pyaccel::bind_cost(m);
}
