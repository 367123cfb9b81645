// The global functions a template can call: Jinja2's range, namespace and dict, and the two
// Hugging Face's chat templates get from transformers, raise_exception and strftime_now (which
// jinja/template.h's caller registers). Safe from any thread; the values they return belong to
// one render.
#pragma once

#include "jinja/value.h"

namespace pdserve::jinja {

// range, namespace and dict, as Jinja2's sandbox defines them (a range past 100000 items fails).
Dict DefaultGlobals();

// raise_exception(message): fails the render with `message` as the error's whole text.
NativeFunction RaiseExceptionFunction();
// strftime_now(format): the local time formatted by strftime (datetime.now().strftime).
NativeFunction StrftimeNowFunction();

}  // namespace pdserve::jinja
