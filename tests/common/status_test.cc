#include "common/status.h"

#include <gtest/gtest.h>

namespace pdserve {
namespace {

Result<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgument("x must be positive, got " + std::to_string(x));
  return x;
}

Status UsesMacros(int x, int* out) {
  PDSERVE_ASSIGN_OR_RETURN(int v, ParsePositive(x));
  *out = v * 2;
  return Status::Ok();
}

TEST(StatusTest, OkIsCheapAndPrintsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(s.WithContext("ignored").ok());
}

TEST(StatusTest, ErrorCarriesCodeMessageAndContext) {
  Status s = NotFound("tensor model.norm.weight");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.WithContext("model.safetensors").ToString(),
            "NotFound: model.safetensors: tensor model.norm.weight");
}

TEST(StatusTest, MacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(UsesMacros(21, &out).ok());
  EXPECT_EQ(out, 42);
  Status s = UsesMacros(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x must be positive, got -1");
}

}  // namespace
}  // namespace pdserve
