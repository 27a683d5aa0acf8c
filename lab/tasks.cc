// lab/tasks.cc: see tasks.h.
#include "tasks.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "ops.h"
#include "posenc/error.h"

namespace posenc::lab {
namespace {

constexpr int64_t kRecallQueries = 4, kRecallMaxPairs = 16, kPasskeyDigits = 5;
// Mohtashami & Jaggi's filler, lowercased to the task alphabet.
constexpr const char* kPasskeyFiller =
    "the grass is green. the sky is blue. the sun is yellow. here we go. there and back again. ";
const std::string kLower = "abcdefghijklmnopqrstuvwxyz", kUpper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                  kDigits = "0123456789";

// One sample: T + 1 symbols, and which of them are answers (predicted from the symbol before).
struct Sample {
  std::string text;
  std::vector<bool> answer;
  void add(const std::string& s, bool is_answer) {
    text += s;
    answer.insert(answer.end(), s.size(), is_answer);
  }
};

char pick(const std::string& symbols, Rng& rng) {
  return symbols[static_cast<size_t>(rng.below(static_cast<int64_t>(symbols.size())))];
}

template <typename T>
void shuffle(std::vector<T>& v, Rng& rng) {  // Fisher-Yates with the lab's own generator (portable)
  for (auto i = static_cast<int64_t>(v.size()) - 1; i > 0; --i)
    std::swap(v[static_cast<size_t>(i)], v[static_cast<size_t>(rng.below(i + 1))]);
}

Sample copy_or_reverse(bool reverse, int64_t T, Rng& rng) {
  const int64_t n = T / 2;
  std::string x;
  for (int64_t i = 0; i < n; ++i) x += pick(kLower, rng);
  Sample s;
  s.add(std::string(static_cast<size_t>(T + 1 - (2 * n + 1)), '.'), false);  // odd T: one leading filler
  s.add(x + "|", false);
  if (reverse) std::reverse(x.begin(), x.end());
  s.add(x, true);
  return s;
}

Sample recall(int64_t T, Rng& rng) {
  const int64_t region = T - 2 * kRecallQueries;  // pairs and filler; then '|' and the queries
  const int64_t pairs = std::min(kRecallMaxPairs, region / 2), filler = region - 2 * pairs;
  std::vector<char> key_order(kUpper.begin(), kUpper.end());
  shuffle(key_order, rng);
  std::vector<std::string> items;
  std::vector<std::string> pair_text(static_cast<size_t>(pairs));
  for (int64_t p = 0; p < pairs; ++p) {
    pair_text[static_cast<size_t>(p)] = {key_order[static_cast<size_t>(p)], pick(kDigits, rng)};
    items.push_back(pair_text[static_cast<size_t>(p)]);
  }
  items.insert(items.end(), static_cast<size_t>(filler), ".");
  shuffle(items, rng);
  Sample s;
  for (const std::string& item : items) s.add(item, false);
  s.add("|", false);
  std::vector<int64_t> asked(static_cast<size_t>(pairs));
  std::iota(asked.begin(), asked.end(), 0);
  shuffle(asked, rng);
  for (int64_t q = 0; q < kRecallQueries; ++q) {
    const std::string& pair = pair_text[static_cast<size_t>(asked[static_cast<size_t>(q)])];
    s.add(pair.substr(0, 1), false);
    s.add(pair.substr(1, 1), true);
  }
  return s;
}

Sample passkey(int64_t T, Rng& rng) {
  std::string key;
  for (int64_t i = 0; i < kPasskeyDigits; ++i) key += pick(kDigits, rng);
  const std::string statement = "key=" + key + ".", question = "?key=";
  const int64_t filler = T + 1 - static_cast<int64_t>(statement.size() + question.size()) - kPasskeyDigits;
  const int64_t depth = rng.below(filler + 1);
  const std::string cycle = kPasskeyFiller;
  const int64_t start = rng.below(static_cast<int64_t>(cycle.size()));
  auto filler_text = [&](int64_t from, int64_t count) {
    std::string out;
    for (int64_t i = 0; i < count; ++i)
      out += cycle[static_cast<size_t>((start + from + i) % static_cast<int64_t>(cycle.size()))];
    return out;
  };
  Sample s;
  s.add(filler_text(0, depth), false);
  s.add(statement, false);
  s.add(filler_text(depth, filler - depth), false);
  s.add(question, false);
  s.add(key, true);
  return s;
}

Sample make_sample(Task task, int64_t T, Rng& rng) {
  switch (task) {
    case Task::copy:
      return copy_or_reverse(false, T, rng);
    case Task::reverse:
      return copy_or_reverse(true, T, rng);
    case Task::recall:
      return recall(T, rng);
    case Task::passkey:
      return passkey(T, rng);
  }
  throw Error("lab task: unknown task");
}

using Clock = std::chrono::steady_clock;

}  // namespace

Task parse_task(const std::string& name) {
  for (Task t : {Task::copy, Task::reverse, Task::recall, Task::passkey})
    if (name == task_name(t)) return t;
  throw Error("task = '" + name + "' is invalid: expected copy, reverse, recall or passkey");
}

const char* task_name(Task task) {
  switch (task) {
    case Task::copy:
      return "copy";
    case Task::reverse:
      return "reverse";
    case Task::recall:
      return "recall";
    case Task::passkey:
      return "passkey";
  }
  return "?";
}

const std::string& task_alphabet() {
  static const std::string alphabet = " .=?|" + kDigits + kLower + kUpper;
  return alphabet;
}
int64_t task_vocab_size() { return static_cast<int64_t>(task_alphabet().size()); }

int64_t task_min_length(Task task) {
  switch (task) {
    case Task::copy:
    case Task::reverse:
      return 2;  // one symbol, '|', its copy
    case Task::recall:
      return 4 * kRecallQueries;  // as many pairs as queries
    case Task::passkey:
      return 10 + 5 + kPasskeyDigits - 1;  // "key=NNNNN." "?key=" NNNNN, no filler
  }
  return 0;
}

TaskBatch make_task_batch(Task task, int64_t B, int64_t T, Rng& rng) {
  if (B < 1) throw Error("lab task: batch = " + std::to_string(B) + " is invalid: must be >= 1");
  if (T < task_min_length(task))
    throw Error(std::string("lab task: length ") + std::to_string(T) + " is too short for " +
                task_name(task) + ": must be >= " + std::to_string(task_min_length(task)));
  TaskBatch batch;
  batch.B = B, batch.T = T;
  batch.tokens.reserve(static_cast<size_t>(B * T));
  batch.targets.reserve(static_cast<size_t>(B * T));
  const std::string& alphabet = task_alphabet();
  auto id = [&](char ch) { return static_cast<int32_t>(alphabet.find(ch)); };
  for (int64_t b = 0; b < B; ++b) {
    const Sample s = make_sample(task, T, rng);
    for (int64_t i = 0; i < T; ++i) {
      batch.tokens.push_back(id(s.text[static_cast<size_t>(i)]));
      batch.targets.push_back(s.answer[static_cast<size_t>(i + 1)] ? id(s.text[static_cast<size_t>(i + 1)])
                                                                   : ops::kIgnoreTarget);
    }
    batch.text.push_back(s.text);
  }
  return batch;
}

std::vector<TaskEvalResult> evaluate_task(Model& model, Task task, const TaskEvalConfig& config) {
  if (config.lengths.empty()) throw Error("lab task eval: lengths is empty");
  if (config.samples < 1)
    throw Error("lab task eval: samples = " + std::to_string(config.samples) + " is invalid: must be >= 1");
  for (int64_t L : config.lengths)
    if (L < task_min_length(task))
      throw Error("lab task eval: length " + std::to_string(L) + " is too short for " + task_name(task) +
                  ": must be >= " + std::to_string(task_min_length(task)));
  if (model.config().vocab_size != task_vocab_size())
    throw Error("lab task eval: the model's vocab_size " + std::to_string(model.config().vocab_size) +
                " is not the tasks' " + std::to_string(task_vocab_size()));
  std::vector<TaskEvalResult> results;
  for (int64_t L : config.lengths) {
    TaskEvalResult r;
    r.length = L;
    Rng rng(config.seed, std::string("task eval ") + task_name(task) + " " + std::to_string(L));
    const int64_t per_batch = std::max<int64_t>(1, std::min(config.samples, config.batch_tokens / L));
    int64_t exact = 0, right = 0;
    const auto t0 = Clock::now();
    try {
      for (int64_t done = 0; done < config.samples; done += per_batch) {
        const int64_t B = std::min(per_batch, config.samples - done);
        const TaskBatch batch = make_task_batch(task, B, L, rng);
        model.forward(batch.tokens.data(), batch.targets.data(), B, L);
        const std::vector<int32_t> predicted = model.predictions();
        for (int64_t b = 0; b < B; ++b) {
          bool all = true;
          for (int64_t i = b * L; i < (b + 1) * L; ++i) {
            const int32_t target = batch.targets[static_cast<size_t>(i)];
            if (target == ops::kIgnoreTarget) continue;
            const bool ok = predicted[static_cast<size_t>(i)] == target;
            right += ok, r.answers += 1, all = all && ok;
          }
          exact += all;
        }
      }
      r.ok = true;
    } catch (const Error& e) {
      r.error = e.what();
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.samples = config.samples;
    if (r.ok) {
      r.exact_match = static_cast<double>(exact) / static_cast<double>(r.samples);
      r.token_accuracy = static_cast<double>(right) / static_cast<double>(r.answers);
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace posenc::lab
