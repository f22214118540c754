#pragma once

// The one way the core reports a caller mistake. Everything in csrc/ (the pure C++ core
// and the bindings alike) throws through fail(), so that a caller mistake is always a
// std::invalid_argument, which the bindings surface as ValueError; other exception types
// are left for broken invariants (std::logic_error) and resource failures (bad_alloc).

#include <sstream>
#include <stdexcept>

namespace pyaccel {

// Throws std::invalid_argument whose message is the parts streamed in order, so call
// sites can name values without converting each one: fail("x = ", x, " must be >= 0").
// A single std::string part is passed through as is.
template <class... Parts>
[[noreturn]] void fail(const Parts &... parts) {
    std::ostringstream msg;
    (msg << ... << parts);
    throw std::invalid_argument(msg.str());
}

}  // namespace pyaccel
