// Escapes text for HTML element content and quoted attribute values (& < > " '), with the
// entities Python's markupsafe writes (&#34; and &#39; for the quotes). Used by the HTML reports
// (bench/serve/html_report, ledger/cost_report_html) and Jinja's escape filter (jinja/filters).
// Pure function: safe from any thread.
#pragma once

#include <string>
#include <string_view>

namespace pdserve {

std::string HtmlEscape(std::string_view text);

}  // namespace pdserve
