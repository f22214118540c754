// Bindings of ngram.h: DraftTree, NgramIndex (prompt lookup), NgramCache, and drafting
// from context + dynamic + static caches. Index and cache work runs with the GIL released.
#include "bindings_common.h"
#include "ngram.h"

#include <optional>
#include <string>

using namespace pybind11::literals;

namespace pyaccel {
namespace {

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
    m.def("agreement_bucket", &agreement_bucket, "k"_a, "n_buckets"_a,
          "Bucket of context agreement k: min(n_buckets - 1, floor(2 log2 max(k, 1))).");
    m.def("agreement_buckets", [](const py::object & ks, int32_t n_buckets) {
        std::vector<int32_t> out = int32_vector(ks, "ks");
        for (int32_t & k : out) k = agreement_bucket(k, n_buckets);
        return as_array(out);
    }, "ks"_a, "n_buckets"_a, "agreement_bucket of each k.");
    m.def("lookup_path_probs", [](const DraftTree & tree, const std::vector<double> & hazard) {
        return as_array(lookup_path_probs(tree, hazard));
    }, "tree"_a, "hazard"_a,
          "P(node accepted) per node of a lookup tree from per-bucket hazards (ngram.h).");
    m.def("lookup_chain", [](const DraftTree & tree, int32_t n_buckets) {
        const LookupChain c = lookup_chain(tree, n_buckets);
        const size_t k = c.tokens.size();
        py::object ends = py::none();
        if (k > 0) {
            ends = py::make_tuple(tree.sources[0], tree.sources[k - 1], tree.contexts[0], tree.contexts[k - 1]);
        }
        return py::make_tuple(as_array(tree.tokens), as_array(tree.parents), py::cast(c.tokens), py::cast(c.buckets),
                              as_array(c.positions), ends);
    }, "tree"_a, "n_buckets"_a,
          "(tokens, parents, chain, buckets, positions, ends) of a lookup tree in one call (ngram.h LookupChain); "
          "ends = (sources[0], sources[n - 1], contexts[0], contexts[n - 1]) of the chain's n nodes, None if n = 0.");
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
        .def_property_readonly("n_max", &NgramCache::n_max)
        .def_property("vocab", &NgramCache::vocab, &NgramCache::set_vocab,
                      "Fingerprint of the tokenizer whose ids this cache counts (u32, saved with it); 0 = unknown.");
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

}  // namespace

void bind_ngram(py::module_ & m) {
    bind_ngram_index(m);
    bind_ngram_cache(m);
    bind_ngram_draft(m);
}

}  // namespace pyaccel
