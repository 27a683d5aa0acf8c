// lab/corpus.h: the text the lab trains on, as character tokens.
//
// The vocabulary is the set of Unicode code points of the whole file (sorted), so every test
// character has an id (the KJV text has 63). The split is contiguous and falls on a line
// boundary: train = the first ~95% of the characters up to the end of a line, test = the rest,
// so long test windows exist and no verse is cut in two.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace posenc::lab {

struct Corpus {
  std::string origin;                // path (or a name for in-memory text)
  std::vector<char32_t> vocabulary;  // id -> code point, sorted
  std::vector<int32_t> train, test;  // token ids
  uint64_t bytes = 0;                // size of the UTF-8 text
  std::string fingerprint;           // FNV-1a 64 of the bytes, hex: which text a result came from

  int64_t vocab_size() const { return static_cast<int64_t>(vocabulary.size()); }
  std::string decode(const int32_t* ids, int64_t n) const;  // back to UTF-8
  std::string vocabulary_utf8() const;                      // the vocabulary as one UTF-8 string
};

// Tokenizes UTF-8 text (malformed UTF-8 is an error naming the byte offset). test_fraction in
// (0, 1): the share of characters that goes to the test split, moved forward to a line end.
Corpus make_corpus(const std::string& utf8_text, double test_fraction, const std::string& origin);
// Reads a regular file of at most kMaxCorpusBytes; a missing file's error says how to prepare the
// default corpus.
Corpus load_corpus(const std::string& path, double test_fraction);

// The default corpus: the King James Bible prepared by scripts/prepare_corpus.sh from Debian's
// bible-kjv-text (31,102 verses, one per line, about 4.1 MB).
inline constexpr const char* kDefaultCorpus = "data/kjv.txt";
// 64 times the default corpus; tokenized, each byte costs up to 8 more (code points and ids).
inline constexpr int64_t kMaxCorpusBytes = int64_t{256} << 20;

}  // namespace posenc::lab
