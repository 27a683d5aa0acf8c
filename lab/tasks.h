// lab/tasks.h: synthetic tasks that need positions to be solved, scored by exact match at lengths
// the model was not trained on. Exploratory: what they show depends on model size and steps.
//
//   copy     x1..xn | x1..xn               n = T/2 random letters, then the same letters again
//   reverse  x1..xn | xn..x1
//   recall   multi-query associative recall (Arora et al. 2023, "Zoology"): up to 16 key-value
//            pairs (distinct uppercase keys, digit values) spread among '.' filler at random
//            gaps, then '|' and 4 of the keys, each followed by its value
//   passkey  (Mohtashami & Jaggi 2023): repeated filler sentences with "key=NNNNN." hidden at a
//            random depth; the sequence ends with "?key=" and the 5 digits
//
// A sample of length T is T input tokens and their T next tokens; only the answer positions
// count (the rest is ops::kIgnoreTarget), in training and in scoring. A sample is an exact match
// when every answer token is the model's most probable next token. Under teacher forcing that is
// the same event as greedy decoding reproducing the whole answer: if every step is right given
// the right prefix, greedy decoding only ever sees right prefixes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model.h"
#include "rng.h"

namespace posenc::lab {

enum class Task { copy, reverse, recall, passkey };
Task parse_task(const std::string& name);  // throws posenc::Error listing the tasks
const char* task_name(Task task);

// The symbols of every task (one vocabulary, so a model's input layer is the same for all):
// space . = ? | digits, lowercase, uppercase. Token id = index in this string.
const std::string& task_alphabet();
int64_t task_vocab_size();
int64_t task_min_length(Task task);  // the shortest T a sample fits in

struct TaskBatch {
  int64_t B = 0, T = 0;
  std::vector<int32_t> tokens, targets;  // (B, T); targets are kIgnoreTarget off the answers
  std::vector<std::string> text;         // each sample as text (T + 1 symbols), for reading
};
// B samples of length T drawn from `rng` (throws posenc::Error if T < task_min_length(task)).
TaskBatch make_task_batch(Task task, int64_t B, int64_t T, Rng& rng);

struct TaskEvalConfig {
  std::vector<int64_t> lengths{64, 128, 256, 512, 1024};
  int64_t samples = 128;        // per length
  int64_t batch_tokens = 8192;  // tokens per forward
  uint64_t seed = 1;            // the evaluation samples (the same for every model)
};

struct TaskEvalResult {
  int64_t length = 0;
  bool ok = false;
  std::string error;          // why the model cannot run at this length (library error)
  double exact_match = 0;     // share of samples with every answer token right
  double token_accuracy = 0;  // share of answer tokens right
  int64_t samples = 0, answers = 0;
  double seconds = 0;
};

std::vector<TaskEvalResult> evaluate_task(Model& model, Task task, const TaskEvalConfig& config);

}  // namespace posenc::lab
