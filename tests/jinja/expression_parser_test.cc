// Tests for jinja/expression_parser.h: Jinja2's operator precedence, literals, filters and tests,
// and assignment targets.
#include "jinja/expression_parser.h"

#include <gtest/gtest.h>

namespace pdserve::jinja {
namespace {

// Parses the expression inside `{{ ... }}`.
Result<ExprPtr> ParseExpr(std::string_view expression) {
  auto tokens = Tokenize("{{ " + std::string(expression) + " }}", "t");
  if (!tokens.ok()) return tokens.status();
  TokenStream ts(std::move(tokens).value(), "t");
  ts.Next();  // {{
  ExpressionParser parser(ts);
  return parser.ParseTuple(false, true, {}, false);
}

ExprPtr ParseOk(std::string_view expression) {
  auto e = ParseExpr(expression);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

TEST(ExpressionParserTest, Precedence) {
  // 'a' + m | trim + 'b' is ('a' + (m|trim)) + 'b': filters bind tighter than operators.
  ExprPtr sum = ParseOk("'a' + m | trim + 'b'");
  ASSERT_EQ(sum->kind, Expr::Kind::kBinary);
  EXPECT_EQ(sum->items[0]->items[1]->kind, Expr::Kind::kFilter);
  // ~ binds tighter than +, ** tighter than *, `not` looser than ==.
  EXPECT_EQ(ParseOk("a + b ~ c")->items[1]->kind, Expr::Kind::kConcat);
  EXPECT_EQ(ParseOk("a * b ** c")->items[1]->name, "**");
  EXPECT_EQ(ParseOk("not a == b")->kind, Expr::Kind::kNot);
  // A unary minus applies before the filter: -x|abs is abs(-x).
  ExprPtr abs = ParseOk("-x|abs");
  ASSERT_EQ(abs->kind, Expr::Kind::kFilter);
  EXPECT_EQ(abs->object->kind, Expr::Kind::kUnary);
  // Comparisons chain; `not in` is one operator.
  ExprPtr chain = ParseOk("a < b <= c not in d");
  EXPECT_EQ(chain->operators, (std::vector<std::string>{"<", "<=", "notin"}));
  // `x is not defined` is not(x is defined); a test takes one bare argument.
  ExprPtr test = ParseOk("x is not divisibleby 3");
  ASSERT_EQ(test->kind, Expr::Kind::kNot);
  EXPECT_EQ(test->object->arguments.positional.size(), 1u);
  // The conditional expression is the loosest.
  EXPECT_EQ(ParseOk("a or b if c else d")->kind, Expr::Kind::kCondExpr);
}

TEST(ExpressionParserTest, LiteralsSubscriptsAndCalls) {
  EXPECT_EQ(ParseOk("'a' 'b'")->constant.string(), "ab");
  EXPECT_EQ(ParseOk("[1, 2,]")->items.size(), 2u);
  EXPECT_EQ(ParseOk("{'a': 1, 'b': 2}")->items.size(), 4u);
  EXPECT_EQ(ParseOk("(1,)")->kind, Expr::Kind::kTuple);
  EXPECT_EQ(ParseOk("1, 2")->kind, Expr::Kind::kTuple);
  EXPECT_TRUE(ParseOk("None")->constant.is_none());
  ExprPtr slice = ParseOk("s[::-1]");
  ASSERT_EQ(slice->items[0]->kind, Expr::Kind::kSlice);
  EXPECT_EQ(slice->items[0]->items[0], nullptr);
  EXPECT_EQ(ParseOk("x.0")->kind, Expr::Kind::kGetItem);
  ExprPtr call = ParseOk("f(1, k=2)");
  EXPECT_EQ(call->arguments.positional.size(), 1u);
  EXPECT_EQ(call->arguments.keyword[0].first, "k");
  EXPECT_FALSE(ParseExpr("f(k=1, 2)").ok());
  EXPECT_FALSE(ParseExpr("f(*args)").ok());
}

TEST(ExpressionParserTest, UnknownFiltersAndTestsFailHere) {
  EXPECT_EQ(ParseExpr("x|nosuch").status().message(), "t:1: No filter named 'nosuch'.");
  EXPECT_EQ(ParseExpr("x is nosuch").status().message(), "t:1: No test named 'nosuch'.");
  EXPECT_NE(ParseExpr("x|urlize").status().message().find("not supported"), std::string::npos);
}

TEST(ExpressionParserTest, AssignmentTargets) {
  auto tokens = Tokenize("{% for (a, b), c in x %}", "t");
  ASSERT_TRUE(tokens.ok());
  TokenStream ts(std::move(tokens).value(), "t");
  ts.Next();
  ts.Next();  // for
  ExpressionParser parser(ts);
  auto target = parser.ParseTargetTuple({"in"});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  ASSERT_EQ(target->items.size(), 2u);
  EXPECT_EQ(target->items[0].items[1].name, "b");
  EXPECT_EQ(target->items[1].name, "c");
}

}  // namespace
}  // namespace pdserve::jinja
