// pyaccel._core. The binding code lives in one file per module (bind_*.cpp, helpers in
// bindings_common.{h,cpp}); this file only names the module and registers them. The
// order matters: a class is registered before the functions whose signatures name it,
// or their docstrings would show C++ type names.
#include "bindings_common.h"

PYBIND11_MODULE(_core, m) {
    m.doc() = "pyaccel's C++ core: sampling transforms, tree layout and draft verification.";
    pyaccel::bind_sampling(m);
    pyaccel::bind_tree_verify(m);
    pyaccel::bind_tree_merge(m);
    pyaccel::bind_calibration(m);
    pyaccel::bind_ngram(m);
    pyaccel::bind_cost(m);
    pyaccel::bind_lookahead(m);
}
