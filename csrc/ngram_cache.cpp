// NgramCache (llama.cpp's common/ngram-cache idea): counting, merging, the file format
// and drafting from context + dynamic + static caches. Declared in ngram.h.
#include "ngram.h"

#include "errors.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>

namespace pyaccel {

namespace {

using namespace ngram_detail;

uint32_t add_saturating(uint32_t a, uint32_t b) {
    return a > std::numeric_limits<uint32_t>::max() - b ? std::numeric_limits<uint32_t>::max()
                                                        : a + b;
}

NgramKey key_of(const int32_t * tokens, int32_t n) {
    NgramKey key;
    key.tokens.fill(-1);
    std::copy(tokens, tokens + n, key.tokens.begin());
    return key;
}

// File layout, all integers little-endian:
//   header  magic[8] "PYACNGC\0" | u32 version | u32 n_min | u32 n_max | u32 vocab
//           | u64 n_entries | u64 payload_bytes | u64 checksum
//   vocab: the tokenizer fingerprint (NgramCache::vocab); 0 = not recorded. Files of the
//           first layout wrote 0 in this (then reserved) field, so they read as unknown.
//   checksum: FNV-1a-64 over the header bytes before it, then the payload
//   payload per n-gram, keys ascending: u32 n | i32 tokens[n] | u32 n_followers
//           | n_followers x (i32 token | u32 count), tokens ascending
// Sorted keys make the bytes a function of the counts alone (same cache, same file).
constexpr char kMagic[8] = {'P', 'Y', 'A', 'C', 'N', 'G', 'C', '\0'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 48;
constexpr size_t kChecksumAt = 40;  // offset of the checksum field in the header

uint64_t fnv1a64(const char * data, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
    for (size_t i = 0; i < n; ++i) {
        h ^= static_cast<unsigned char>(data[i]);
        h *= 0x100000001b3ULL;
    }
    return h;
}

// "0x0012abcd": fingerprints as pyaccel prints them everywhere.
std::string hex32(uint32_t value) {
    char buf[11];
    std::snprintf(buf, sizeof(buf), "0x%08x", value);
    return buf;
}

void put_le(std::string & out, uint64_t value, int n_bytes) {
    for (int i = 0; i < n_bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Bounds-checked little-endian reader; every failure names the file and the remedy.
struct FileReader {
    const std::string & path;
    const std::string & bytes;
    size_t pos = 0;

    [[noreturn]] void fail(const std::string & why) const {
        pyaccel::fail("n-gram cache file '", path, "' ", why,
                      ": rebuild it (`pyaccel ngram build`, or NgramCache.update then save)");
    }
    uint64_t get(int n_bytes) {
        if (bytes.size() - pos < static_cast<size_t>(n_bytes)) fail("is truncated");
        uint64_t value = 0;
        for (int i = 0; i < n_bytes; ++i) {
            value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[pos + i])) << (8 * i);
        }
        pos += n_bytes;
        return value;
    }
    int32_t get_i32() { return static_cast<int32_t>(static_cast<uint32_t>(get(4))); }
};

std::string read_file(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        fail("cannot open n-gram cache file '", path, "' for reading: check the path");
    }
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool token_less(const TokenCount & a, int32_t token) { return a.token < token; }

void followers_add(NgramFollowers & followers, int32_t token, uint32_t count) {
    auto it = std::lower_bound(followers.begin(), followers.end(), token, token_less);
    if (it != followers.end() && it->token == token) {
        it->count = add_saturating(it->count, count);
    } else {
        followers.insert(it, TokenCount{token, count});
    }
}

// Linear merge of two ascending lists; `add` may alias `into`.
void followers_merge(NgramFollowers & into, const NgramFollowers & add) {
    NgramFollowers merged;
    merged.reserve(into.size() + add.size());
    auto a = into.cbegin(), b = add.cbegin();
    while (a != into.cend() || b != add.cend()) {
        if (b == add.cend() || (a != into.cend() && a->token < b->token)) {
            merged.push_back(*a++);
        } else if (a == into.cend() || b->token < a->token) {
            merged.push_back(*b++);
        } else {
            merged.push_back(TokenCount{a->token, add_saturating(a->count, b->count)});
            ++a, ++b;
        }
    }
    into.swap(merged);
}

}  // namespace

uint32_t ngram_followers_count(const NgramFollowers & followers, int32_t token) {
    auto it = std::lower_bound(followers.begin(), followers.end(), token, token_less);
    return it != followers.end() && it->token == token ? it->count : 0;
}

size_t NgramKeyHash::operator()(const NgramKey & key) const {
    uint64_t h = kHashSeed;
    for (int32_t t : key.tokens) h = hash_mix(h, t);
    return static_cast<size_t>(h);
}

NgramCache::NgramCache(int32_t n_min, int32_t n_max) : n_min_(n_min), n_max_(n_max) {
    check_n_range(n_min, n_max, kNgramCacheMaxN, "NgramCache");
}

void NgramCache::update(const int32_t * tokens, size_t n_tokens, size_t start) {
    check_tokens(tokens, n_tokens, "tokens");
    if (start > n_tokens) {
        fail("update: start=", start, " is past the ", n_tokens,
             " tokens given: pass the stream's previous length");
    }
    for (size_t i = start; i < n_tokens; ++i) {
        for (int32_t n = n_min_; n <= n_max_ && static_cast<size_t>(n) <= i; ++n) {
            followers_add(map_[key_of(tokens + i - n, n)], tokens[i], 1);
        }
    }
}

void NgramCache::merge(const NgramCache & other) {
    if (other.n_min_ != n_min_ || other.n_max_ != n_max_) {
        fail("merge: caches count different n ranges (", n_min_, "..", n_max_, " vs ",
             other.n_min_, "..", other.n_max_, "): merge caches with the same n_min, n_max");
    }
    if (vocab_ != 0 && other.vocab_ != 0 && vocab_ != other.vocab_) {
        fail("merge: the caches count the ids of different tokenizers (vocabulary fingerprints ",
             hex32(vocab_), " vs ", hex32(other.vocab_),
             "): merge only caches built with the same model's tokenizer");
    }
    if (vocab_ == 0) vocab_ = other.vocab_;
    // Safe for other == *this: every key looked up exists, so nothing is inserted.
    for (const auto & entry : other.map_) followers_merge(map_[entry.first], entry.second);
}

const NgramFollowers * NgramCache::find(const int32_t * ngram, size_t n_tokens) const {
    if (n_tokens < static_cast<size_t>(n_min_) || n_tokens > static_cast<size_t>(n_max_)) {
        fail("an n-gram of ", n_tokens, " tokens, but this cache counts n in ", n_min_, "..",
             n_max_, ": pass between n_min and n_max tokens");
    }
    auto it = map_.find(key_of(ngram, static_cast<int32_t>(n_tokens)));
    return it == map_.end() ? nullptr : &it->second;
}

void NgramCache::save(const std::string & path) const {
    std::vector<const std::pair<const NgramKey, NgramFollowers> *> entries;
    entries.reserve(map_.size());
    for (const auto & entry : map_) entries.push_back(&entry);
    std::sort(entries.begin(), entries.end(),
              [](const auto * a, const auto * b) { return a->first < b->first; });
    std::string payload;
    for (const auto * entry : entries) {
        const auto & key = entry->first.tokens;
        const int32_t n = static_cast<int32_t>(std::find(key.begin(), key.end(), -1) - key.begin());
        put_le(payload, static_cast<uint32_t>(n), 4);
        for (int32_t k = 0; k < n; ++k) put_le(payload, static_cast<uint32_t>(key[k]), 4);
        put_le(payload, entry->second.size(), 4);
        for (const TokenCount & f : entry->second) {
            put_le(payload, static_cast<uint32_t>(f.token), 4);
            put_le(payload, f.count, 4);
        }
    }
    std::string header(kMagic, sizeof(kMagic));
    put_le(header, kFormatVersion, 4);
    put_le(header, static_cast<uint32_t>(n_min_), 4);
    put_le(header, static_cast<uint32_t>(n_max_), 4);
    put_le(header, vocab_, 4);
    put_le(header, entries.size(), 8);
    put_le(header, payload.size(), 8);
    put_le(header, fnv1a64(payload.data(), payload.size(), fnv1a64(header.data(), kChecksumAt)), 8);

    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(header.data(), static_cast<std::streamsize>(header.size()));
        out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
        if (!out.flush()) {
            std::remove(tmp.c_str());
            fail("cannot write n-gram cache file '", tmp,
                 "': check that the folder exists and is writable");
        }
    }
    // std::rename does not replace an existing file on Windows.
    if (std::rename(tmp.c_str(), path.c_str()) != 0 &&
        (std::remove(path.c_str()) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0)) {
        fail("cannot replace n-gram cache file '", path, "' (new data left in '", tmp,
             "'): check permissions");
    }
}

NgramCache NgramCache::load(const std::string & path) {
    const std::string bytes = read_file(path);
    FileReader in{path, bytes};
    if (bytes.compare(0, sizeof(kMagic), kMagic, sizeof(kMagic)) != 0) {
        in.fail(bytes.size() < sizeof(kMagic) ? "is truncated" : "is not a pyaccel n-gram cache");
    }
    in.pos = sizeof(kMagic);
    const uint32_t version = static_cast<uint32_t>(in.get(4));
    if (version != kFormatVersion) {
        in.fail("has format version " + std::to_string(version) + " (this pyaccel reads " +
                std::to_string(kFormatVersion) + ")");
    }
    const int32_t n_min = in.get_i32(), n_max = in.get_i32();
    const uint32_t vocab = static_cast<uint32_t>(in.get(4));
    const uint64_t n_entries = in.get(8), payload_bytes = in.get(8), checksum = in.get(8);
    if (payload_bytes > bytes.size() - kHeaderBytes) in.fail("is truncated");
    if (payload_bytes < bytes.size() - kHeaderBytes) in.fail("is corrupted (trailing bytes)");
    if (fnv1a64(bytes.data() + kHeaderBytes, payload_bytes, fnv1a64(bytes.data(), kChecksumAt)) !=
        checksum) {
        in.fail("is corrupted (checksum mismatch)");
    }
    if (n_min < 1 || n_max < n_min || n_max > kNgramCacheMaxN) in.fail("is corrupted (n range)");
    NgramCache cache(n_min, n_max);
    cache.vocab_ = vocab;
    for (uint64_t e = 0; e < n_entries; ++e) {
        const int32_t n = in.get_i32();
        if (n < n_min || n > n_max) in.fail("is corrupted (n-gram length)");
        NgramKey key;
        key.tokens.fill(-1);
        for (int32_t k = 0; k < n; ++k) {
            if ((key.tokens[k] = in.get_i32()) < 0) in.fail("is corrupted (token id)");
        }
        const uint32_t n_followers = static_cast<uint32_t>(in.get(4));
        NgramFollowers & followers = cache.map_[key];
        if (n_followers == 0 || !followers.empty()) in.fail("is corrupted (n-gram entry)");
        // n_followers is read from the file: reserve no more entries than the bytes left
        // can hold (8 each), or a corrupted count asks for up to 32 GiB before the reads
        // below find the file truncated.
        followers.reserve(std::min<size_t>(n_followers, (bytes.size() - in.pos) / 8));
        for (uint32_t f = 0; f < n_followers; ++f) {
            const int32_t token = in.get_i32();
            const uint32_t count = static_cast<uint32_t>(in.get(4));
            if (token < 0 || count == 0 || (f > 0 && token <= followers.back().token)) {
                in.fail("is corrupted (follower entry)");
            }
            followers.push_back(TokenCount{token, count});
        }
    }
    if (in.pos != bytes.size()) in.fail("is corrupted (entry count)");
    return cache;
}

// ---- Drafting from context + dynamic + static caches ----

namespace {

struct Vote {
    int32_t token = -1;
    uint32_t count = 0;   // the chosen token's own count in the drafting cache
    uint64_t total = 0;   // all followers' counts: the sample size
};

// The follower with the best count * static vote; votes == nullptr means no static
// evidence. Scores are doubles: exact for any realistic count, and no overflow.
// Followers ascend by token, so on equal scores the smaller token stays.
Vote best_follower(const NgramFollowers & followers, const NgramFollowers * votes, int32_t weight) {
    Vote best;
    double best_score = -1.0;
    for (const TokenCount & f : followers) {
        best.total += f.count;
        const uint32_t n_votes = votes != nullptr ? ngram_followers_count(*votes, f.token) : 0;
        const double score = static_cast<double>(f.count) *
                             (n_votes > 0 ? static_cast<double>(weight) * n_votes : 1.0);
        if (score > best_score) {
            best_score = score;
            best.token = f.token;
            best.count = f.count;
        }
    }
    return best;
}

bool passes(const Vote & vote, int32_t min_samples, int32_t min_percent) {
    return vote.token >= 0 && vote.total >= static_cast<uint64_t>(min_samples) &&
           100 * uint64_t{vote.count} >= static_cast<uint64_t>(min_percent) * vote.total;
}

// Longest n first: a longer matching context is the more specific evidence.
int32_t draft_from(const NgramCache & cache, const std::vector<int32_t> & seq,
                   const NgramFollowers * votes, int32_t weight,
                   const NgramDraftThresholds::Table & min_samples,
                   const NgramDraftThresholds::Table & min_percent) {
    for (int32_t n = cache.n_max(); n >= cache.n_min(); --n) {
        if (seq.size() < static_cast<size_t>(n)) continue;
        const NgramFollowers * followers = cache.find(seq.data() + seq.size() - n, n);
        if (followers == nullptr) continue;
        const Vote vote = best_follower(*followers, votes, weight);
        if (passes(vote, min_samples[n - 1], min_percent[n - 1])) return vote.token;
    }
    return -1;
}

}  // namespace

void ngram_thresholds_check(const NgramDraftThresholds & t) {
    auto bad = [](const char * what) { fail("NgramDraftThresholds.", what); };
    for (int32_t i = 0; i < kNgramCacheMaxN; ++i) {
        if (std::min(t.context_min_samples[i], t.dynamic_min_samples[i]) < 0) {
            bad("*_min_samples must be >= 0");
        }
        for (int32_t p : {t.context_min_percent[i], t.dynamic_min_percent[i]}) {
            if (p < 0 || p > 100) bad("*_min_percent must lie in 0..100");
        }
    }
    if (t.static_n < 1 || t.static_n > kNgramCacheMaxN) bad("static_n must lie in 1..4");
    if (t.static_min_samples < 0) bad("static_min_samples must be >= 0");
    if (t.static_min_percent < 0 || t.static_min_percent > 100) {
        bad("static_min_percent must lie in 0..100");
    }
    if (t.static_weight < 1) bad("static_weight must be >= 1");
}

std::vector<int32_t> ngram_cache_draft(const int32_t * context_tokens, size_t n_context,
                                       const NgramCache & context_cache,
                                       const NgramCache & dynamic_cache,
                                       const NgramCache * static_cache, int32_t n_draft,
                                       const NgramDraftThresholds & th) {
    check_tokens(context_tokens, n_context, "context_tokens");
    ngram_thresholds_check(th);
    if (n_draft < 0) fail("n_draft must be >= 0");
    if (static_cache != nullptr &&
        (th.static_n < static_cache->n_min() || th.static_n > static_cache->n_max())) {
        fail("the static cache counts n in ", static_cache->n_min(), "..", static_cache->n_max(),
             " but static_n is ", th.static_n, ": build it with that n or change static_n");
    }
    // Only the last kNgramCacheMaxN tokens are ever looked at; the draft extends them.
    const size_t keep = std::min<size_t>(n_context, kNgramCacheMaxN);
    std::vector<int32_t> seq(context_tokens + n_context - keep, context_tokens + n_context);
    std::vector<int32_t> draft;
    const int32_t ns = th.static_n;
    while (static_cast<int32_t>(draft.size()) < n_draft) {
        const NgramFollowers * votes = nullptr;
        if (static_cache != nullptr && seq.size() >= static_cast<size_t>(ns)) {
            votes = static_cache->find(seq.data() + seq.size() - ns, ns);
        }
        int32_t token = draft_from(context_cache, seq, votes, th.static_weight,
                                   th.context_min_samples, th.context_min_percent);
        if (token < 0) {
            token = draft_from(dynamic_cache, seq, votes, th.static_weight,
                               th.dynamic_min_samples, th.dynamic_min_percent);
        }
        if (token < 0 && votes != nullptr) {
            const Vote vote = best_follower(*votes, nullptr, 1);
            if (passes(vote, th.static_min_samples, th.static_min_percent)) token = vote.token;
        }
        if (token < 0) break;
        draft.push_back(token);
        seq.push_back(token);
    }
    return draft;
}

}  // namespace pyaccel
