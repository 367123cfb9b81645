// The x-pdserve-tags header (and `pdserve report`'s --tag flags, which take the same text):
// "env=prod,job=nightly" into the key -> value tags a request's ledger rows carry. Pure: any
// thread. Called by HttpSession for each request and by the report and ledger commands.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pdserve::gateway {

// Keys are 1-64 of [A-Za-z0-9_.-], values UTF-8 with no ',' or '='; blanks around items, keys
// and values are trimmed and empty items skipped. InvalidArgument saying which item is wrong.
Result<std::map<std::string, std::string>> ParseTags(std::string_view text);

}  // namespace pdserve::gateway
