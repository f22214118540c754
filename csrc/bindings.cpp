// pyaccel._core. The binding code lives in one file per module (bind_*.cpp, helpers in
// bindings_common.{h,cpp}); this file only names the module and registers them. The
// order matters: a class is registered before the functions whose signatures name it,
// or their docstrings would show C++ type names.
#include "bindings_common.h"

#include <cstdint>

namespace {

// A log callback for llama.cpp that drops every message. It is C, not Python: an
// exception raised in a Python ctypes callback (a Ctrl-C arriving while llama.cpp loads a
// model and logs) is dropped by ctypes, and the program runs on as if never interrupted.
extern "C" void silent_log(int /*level*/, const char * /*text*/, void * /*user_data*/) {}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.def("silent_log_callback", [] { return reinterpret_cast<std::uintptr_t>(&silent_log); },
          "Address of a C log callback (ggml_log_callback) that drops every message, for llama_log_set.");
    m.doc() = "pyaccel's C++ core: sampling transforms, tree layout and draft verification.";
    pyaccel::bind_sampling(m);
    pyaccel::bind_tree_verify(m);
    pyaccel::bind_tree_merge(m);
    pyaccel::bind_calibration(m);
    pyaccel::bind_ngram(m);
    pyaccel::bind_cost(m);
    pyaccel::bind_lookahead(m);
}
