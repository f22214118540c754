#include "rng.h"

#include "errors.h"

namespace pyaccel {

namespace {

uint64_t splitmix64(uint64_t & x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

} // namespace

Rng::Rng(uint64_t seed) {
    for (auto & w : s_) {
        w = splitmix64(seed);
    }
}

uint64_t Rng::next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

double Rng::uniform() {
    return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

std::array<uint8_t, Rng::state_bytes> Rng::get_state() const {
    std::array<uint8_t, state_bytes> out{};
    for (int w = 0; w < 4; ++w) {
        for (int b = 0; b < 8; ++b) {
            out[w * 8 + b] = static_cast<uint8_t>(s_[w] >> (8 * b));
        }
    }
    return out;
}

void Rng::set_state(const uint8_t * bytes, int64_t n_bytes) {
    if (n_bytes != state_bytes) {
        fail("Rng state must be exactly 32 bytes, as returned by get_state()");
    }
    std::array<uint64_t, 4> s{};
    for (int w = 0; w < 4; ++w) {
        for (int b = 0; b < 8; ++b) {
            s[w] |= static_cast<uint64_t>(bytes[w * 8 + b]) << (8 * b);
        }
    }
    if ((s[0] | s[1] | s[2] | s[3]) == 0) {
        fail("Rng state must not be all zero bytes; use a state returned by get_state()");
    }
    s_ = s;
}

} // namespace pyaccel
