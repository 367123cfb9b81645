// Tests for jinja/parser.h: the statement tree, Jinja2's operator precedence, and the errors
// for what the engine refuses, each naming its line.
#include "jinja/parser.h"

#include <gtest/gtest.h>

#include <string>

namespace pdserve::jinja {
namespace {

StmtList ParseOk(std::string_view source) {
  auto parsed = Parse(source, "t");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? std::move(parsed).value() : StmtList{};
}

std::string ErrorOf(std::string_view source) {
  auto parsed = Parse(source, "tpl");
  EXPECT_FALSE(parsed.ok()) << source;
  return parsed.ok() ? std::string() : parsed.status().message();
}

TEST(ParserTest, BuildsStatements) {
  StmtList body = ParseOk("x{% for k, v in d.items() if v %}{{ k }}{% else %}e{% endfor %}");
  ASSERT_EQ(body.size(), 2u);
  EXPECT_EQ(body[0]->kind, Stmt::Kind::kText);
  const Stmt& loop = *body[1];
  EXPECT_EQ(loop.kind, Stmt::Kind::kFor);
  ASSERT_EQ(loop.target.items.size(), 2u);
  EXPECT_EQ(loop.target.items[1].name, "v");
  EXPECT_NE(loop.condition, nullptr);
  EXPECT_EQ(loop.body.size(), 1u);
  EXPECT_EQ(loop.else_body.size(), 1u);
}

TEST(ParserTest, ElifChainsNest) {
  StmtList body = ParseOk("{% if a %}1{% elif b %}2{% else %}3{% endif %}");
  ASSERT_EQ(body.size(), 1u);
  ASSERT_EQ(body[0]->else_body.size(), 1u);
  const Stmt& elif = *body[0]->else_body[0];
  EXPECT_EQ(elif.kind, Stmt::Kind::kIf);
  EXPECT_EQ(elif.else_body.size(), 1u);
}

TEST(ParserTest, FiltersBindTighterThanArithmetic) {
  // 'a' + m | trim + 'b' is 'a' + (m|trim) + 'b'.
  StmtList body = ParseOk("{{ 'a' + m | trim + 'b' }}");
  const Expr& sum = *body[0]->expr;
  ASSERT_EQ(sum.kind, Expr::Kind::kBinary);
  EXPECT_EQ(sum.items[0]->kind, Expr::Kind::kBinary);
  EXPECT_EQ(sum.items[0]->items[1]->kind, Expr::Kind::kFilter);
  // ~ binds tighter than +, `not` looser than comparisons, `is not` is a negated test.
  EXPECT_EQ(ParseOk("{{ a + b ~ c }}")[0]->expr->items[1]->kind, Expr::Kind::kConcat);
  EXPECT_EQ(ParseOk("{{ not a == b }}")[0]->expr->kind, Expr::Kind::kNot);
  StmtList negated = ParseOk("{{ x is not defined }}");
  const Expr& test = *negated[0]->expr;
  ASSERT_EQ(test.kind, Expr::Kind::kNot);
  EXPECT_EQ(test.object->kind, Expr::Kind::kTest);
}

TEST(ParserTest, MacrosRecordDefaultsAndCatchAll) {
  StmtList body = ParseOk("{% macro m(a, b=1) %}{{ varargs }}{% endmacro %}");
  const Stmt& macro = *body[0];
  EXPECT_EQ(macro.parameters, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(macro.defaults.size(), 1u);
  EXPECT_TRUE(macro.catches_varargs);
  EXPECT_FALSE(macro.catches_kwargs);
}

TEST(ParserTest, NamespaceAssignment) {
  StmtList body = ParseOk("{% set ns.x = 1 %}");
  EXPECT_EQ(body[0]->namespace_name, "ns");
  EXPECT_EQ(body[0]->target.name, "x");
}

TEST(ParserTest, RefusesWhatItCannotRenderNamingTheLine) {
  EXPECT_NE(ErrorOf("a\n{% include 'x' %}").find("tpl:2: the 'include' tag is not supported"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{% extends 'b' %}").find("'extends' tag is not supported"), std::string::npos);
  EXPECT_NE(ErrorOf("\n\n{{ x|groupby('a') }}").find("tpl:3: the 'groupby' filter is not"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ x|nosuch }}").find("No filter named 'nosuch'."), std::string::npos);
  EXPECT_NE(ErrorOf("{{ x is nosuch }}").find("No test named 'nosuch'."), std::string::npos);
  EXPECT_NE(ErrorOf("{% for x in y recursive %}{% endfor %}").find("recursive loops"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{% break %}").find("outside of a loop"), std::string::npos);
  EXPECT_NE(ErrorOf("{% do x %}").find("Encountered unknown tag 'do'."), std::string::npos);
}

TEST(ParserTest, ReportsUnclosedBlocks) {
  std::string message = ErrorOf("{% for x in y %}\n{% if x %}");
  EXPECT_NE(message.find("Unexpected end of template"), std::string::npos) << message;
  EXPECT_NE(message.find("'endif'"), std::string::npos) << message;
  EXPECT_NE(ErrorOf("{{ 1 + }}").find("tpl:1:"), std::string::npos);
  EXPECT_NE(ErrorOf("{% macro m(a=1, b) %}{% endmacro %}").find("non-default argument"),
            std::string::npos);
}

TEST(ParserTest, RefusesNestingDeepEnoughToExhaustTheStack) {
  EXPECT_TRUE(Parse("{{ " + std::string(20, '(') + "1" + std::string(20, ')') + " }}", "t").ok());
  EXPECT_NE(ErrorOf("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}")
                .find("nests too deeply"),
            std::string::npos);
  std::string blocks;
  for (int i = 0; i < 400; ++i) blocks += "{% if x %}";
  EXPECT_NE(ErrorOf(blocks).find("nests too deeply"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ " + std::string(5000, '-') + "1 }}").find("nests too deeply"),
            std::string::npos);
}

}  // namespace
}  // namespace pdserve::jinja
