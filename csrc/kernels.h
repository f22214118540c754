// Internal: the element-wise kernels behind the sampling and verification
// passes over a vocabulary-sized row. Written so that -O3 -fopenmp-simd
// vectorises them on the baseline ISA (SSE2 / NEON) without -ffast-math.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

// Row passes are compiled three times on x86-64 glibc (GCC, Clang), for
// AVX-512F, AVX2 and the baseline, and the loader picks one per CPU: wheels
// stay portable while the exp pass runs several times faster than SSE2 on recent CPUs.
// Results can differ between the variants in the last bits of a sum; the same
// machine always takes the same path.
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)  // ifunc: glibc only
#    if __has_attribute(target_clones)
#        define PYACCEL_ROW_PASS __attribute__((target_clones("avx512f", "avx2", "default")))
#    endif
#endif
#ifndef PYACCEL_ROW_PASS
#    define PYACCEL_ROW_PASS
#endif

namespace pyaccel {
namespace kernels {

// Rows are processed in blocks: per-block reductions run in float SIMD lanes
// (a mixed float -> double reduction does not vectorise on SSE2), and blocks
// are accumulated in double, so a 150k-entry sum keeps ~1e-7 relative error.
// Reductions are written out as plain `#pragma omp simd` loops, not through a
// lambda helper: GCC does not vectorise the latter inside target clones.
constexpr int32_t kBlock = 1024;

// Below this exp() underflows float; such weights are exactly 0.
constexpr float kExpFloor = -87.0f;

inline uint32_t nonfinite_bit(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return (u & 0x7f800000u) == 0x7f800000u;
}

// exp(z) for z <= 0, branch-free (std::exp does not vectorise without
// -ffast-math). Cephes expf polynomial: ~1 ulp on [-87, 0].
// (t + 1.5 * 2^23) - 1.5 * 2^23 rounds t to the nearest integer.
inline float exp_nonpos(float z) {
    const float zc = std::max(z, kExpFloor);
    const float k  = (zc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = zc - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float poly = 1.9875691500e-4f;
    poly = poly * r + 1.3981999507e-3f;
    poly = poly * r + 8.3334519073e-3f;
    poly = poly * r + 4.1665795894e-2f;
    poly = poly * r + 1.6666665459e-1f;
    poly = poly * r + 5.0000001201e-1f;
    const float y = poly * r * r + r + 1.0f;
    const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(k) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    const float e = y * scale;  // computed unconditionally: a select vectorises, a branch does not
    return z < kExpFloor ? 0.0f : e;
}

// Shortest readable form of a float parameter for error messages ("0.9", not
// std::to_string's "0.900000").
inline std::string float_str(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.7g", x);
    return buf;
}

} // namespace kernels
} // namespace pyaccel
