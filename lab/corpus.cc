// lab/corpus.cc: see corpus.h.
#include "corpus.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "posenc/error.h"
#include "files.h"

namespace posenc::lab {
namespace {

// Decodes UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF).
std::vector<char32_t> decode_utf8(const std::string& s, const std::string& origin) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  auto bad = [&](size_t at) {
    throw Error("corpus: " + origin + " is not valid UTF-8 at byte " + std::to_string(at));
  };
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int extra = 0;
    char32_t cp = 0, min = 0;
    if (b0 < 0x80) {
      cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      extra = 1;
      cp = b0 & 0x1F;
      min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      extra = 2;
      cp = b0 & 0x0F;
      min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      extra = 3;
      cp = b0 & 0x07;
      min = 0x10000;
    } else
      bad(i);
    if (i + extra >= s.size()) bad(i);  // truncated sequence
    for (int k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) bad(i);
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) bad(i);
    out.push_back(cp);
    i += 1 + extra;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string fnv1a_hex(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

std::string Corpus::decode(const int32_t* ids, int64_t n) const {
  std::string out;
  for (int64_t i = 0; i < n; ++i) append_utf8(out, vocabulary.at(static_cast<size_t>(ids[i])));
  return out;
}

std::string Corpus::vocabulary_utf8() const {
  std::string out;
  for (char32_t cp : vocabulary) append_utf8(out, cp);
  return out;
}

Corpus make_corpus(const std::string& utf8_text, double test_fraction, const std::string& origin) {
  if (!(test_fraction > 0 && test_fraction < 1))
    throw Error("corpus: test_fraction = " + std::to_string(test_fraction) +
                " is invalid: must lie in (0, 1)");
  const std::vector<char32_t> chars = decode_utf8(utf8_text, origin);
  if (chars.size() < 2)
    throw Error("corpus: " + origin + " has " + std::to_string(chars.size()) +
                " characters, too few to split");
  Corpus c;
  c.origin = origin;
  c.bytes = utf8_text.size();
  c.fingerprint = fnv1a_hex(utf8_text);
  c.vocabulary = chars;
  std::sort(c.vocabulary.begin(), c.vocabulary.end());
  c.vocabulary.erase(std::unique(c.vocabulary.begin(), c.vocabulary.end()), c.vocabulary.end());
  std::vector<int32_t> ids(chars.size());
  for (size_t i = 0; i < chars.size(); ++i)
    ids[i] = static_cast<int32_t>(std::lower_bound(c.vocabulary.begin(), c.vocabulary.end(), chars[i]) -
                                  c.vocabulary.begin());
  // Split after the first line end at or past the train share; text without line ends splits at
  // the character count.
  const auto train_target =
      static_cast<size_t>(std::floor(static_cast<double>(chars.size()) * (1 - test_fraction)));
  size_t split = std::clamp<size_t>(train_target, 1, chars.size() - 1);
  for (size_t i = split; i < chars.size(); ++i)
    if (chars[i - 1] == U'\n') {
      split = i;
      break;
    }
  if (split >= chars.size()) split = std::clamp<size_t>(train_target, 1, chars.size() - 1);
  c.train.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(split));
  c.test.assign(ids.begin() + static_cast<std::ptrdiff_t>(split), ids.end());
  return c;
}

Corpus load_corpus(const std::string& path, double test_fraction) {
  // exists() stats without opening: opening a FIFO to probe it would block.
  std::error_code ignored;
  if (!std::filesystem::exists(path, ignored))
    throw Error("corpus: cannot open '" + path + "'" +
                (path == kDefaultCorpus
                     ? ": prepare the default corpus with ./scripts/prepare_corpus.sh (installs Debian's "
                       "bible-kjv-text and writes data/kjv.txt), or pass --corpus PATH to any UTF-8 text file"
                     : ": pass --corpus PATH to a readable UTF-8 text file"));
  return make_corpus(read_regular_file("corpus", path, kMaxCorpusBytes), test_fraction, path);
}

}  // namespace posenc::lab
