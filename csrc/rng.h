// Caller-owned, seeded random number generator for every stochastic choice in
// pyaccel's core (sampling, acceptance tests). Reproducible across platforms:
// the same seed gives the same stream on every compiler and OS.
//
// xoshiro256** (Blackman & Vigna), state seeded by splitmix64 so that nearby
// seeds (0, 1, 2, ...) give unrelated streams.
#pragma once

#include <array>
#include <cstdint>

namespace pyaccel {

class Rng {
public:
    static constexpr int state_bytes = 32;

    explicit Rng(uint64_t seed);

    // Next 64 random bits.
    uint64_t next_u64();

    // Uniform double in [0, 1) with 53 random bits; never returns 1.0.
    double uniform();

    // State as 32 little-endian bytes (4 words of xoshiro256**), so that a
    // saved stream continues bit-identically after rng_set_state.
    std::array<uint8_t, state_bytes> get_state() const;

    // Restores a state from get_state. bytes: exactly state_bytes bytes, not
    // all zero (the one state xoshiro cannot leave); std::invalid_argument
    // otherwise.
    void set_state(const uint8_t * bytes, int64_t n_bytes);

private:
    std::array<uint64_t, 4> s_;
};

} // namespace pyaccel
