// Builds the statement tree of a Jinja template from its tokens, following Jinja2's grammar
// (statements here, expressions in jinja/expression_parser.h), with the loopcontrols extension
// (break, continue) and Hugging Face's `{% generation %}` tag. What this engine cannot render
// faithfully is refused here, naming the line: include/extends/import/block/call tags, recursive
// loops, filters it lacks, unknown tests. Called by jinja/template.cc. Pure function: safe from any
// thread.
#pragma once

#include <string_view>

#include "common/status.h"
#include "jinja/ast.h"

namespace pdserve::jinja {

// Errors are InvalidArgument "ORIGIN:LINE: message".
Result<StmtList> Parse(std::string_view source, std::string_view origin);

}  // namespace pdserve::jinja
