// Escapes text for HTML element content and quoted attribute values (& < > " '). Used by the
// HTML reports (bench/serve/html_report, ledger/cost_report_html). Pure function: safe from any
// thread.
#pragma once

#include <string>
#include <string_view>

namespace pdserve {

std::string HtmlEscape(std::string_view text);

}  // namespace pdserve
