// tests/model/model_plan.h: what the model-plan tests (tests/model/test_*.cc) share: a config's JSON from a
// model_type and members, the message of the error a config raises, and a plan's warnings.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "posenc/error.h"
#include "posenc/model.h"

namespace posenc::test {

// {"model_type": "<type>", <members>} (members: more JSON members, or empty).
inline std::string model_json(const std::string& type, const std::string& members = "") {
  return R"({"model_type": ")" + type + "\"" + (members.empty() ? "" : ", " + members) + "}";
}

// The message of the posenc::Error planning `json` raises, or "no error".
inline std::string plan_error(const std::string& json) {
  try {
    model_positions_from_hf_json(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Expects planning `json` to raise a posenc::Error whose message contains `text`.
inline void expect_plan_error(const std::string& json, const std::string& text) {
  const std::string message = plan_error(json);
  EXPECT_NE(message.find(text), std::string::npos) << message;
}

inline bool has_warning(const ModelPositions& m, const std::string& text) {
  for (const std::string& w : m.warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace posenc::test
