#!/usr/bin/python3
"""Reference renderer for pdserve's Jinja engine: renders templates exactly as Hugging Face
transformers' apply_chat_template does (utils/chat_template_utils.py: _compile_jinja_template
and render_jinja_template), with Debian's python3-jinja2 (scripts/setup --test installs it).

Reads one JSON document on stdin, {"cases": [CASE, ...]}, and prints {"results": [RESULT, ...]}
on stdout, one RESULT per CASE in order. A CASE is either

  {"template": TEXT, "variables": {...}}
      render TEXT with exactly these variables, or

  {"tokenizer_config": PATH, "chat_template": TEXT (optional), "messages": [...],
   "add_generation_prompt": BOOL}
      what apply_chat_template(messages, tools=..., add_generation_prompt=...) renders for a
      model whose tokenizer_config.json is PATH: its chat_template (a string, or the list entry
      named "default"; "chat_template" in the case overrides it, as a chat_template.jinja file
      does), with messages, tools (the case's "tools", else None), documents=None,
      add_generation_prompt and the special tokens the config defines (bos_token, eos_token,
      unk_token, pad_token; strings or {"content": ...} objects).

A RESULT is {"output": TEXT} or {"error": MESSAGE, "type": EXCEPTION CLASS NAME}. Run with
/usr/bin/python3 (Debian's jinja2, not a virtual environment's).
"""

import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "pad_token")


class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %} tag, without the index tracking: renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_generation_support")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers overrides Jinja's tojson, which would escape HTML characters.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def token_text(value):
    if isinstance(value, dict):
        return value.get("content")
    return value


def chat_variables(case):
    with open(case["tokenizer_config"], encoding="utf-8") as f:
        config = json.load(f)
    template = case.get("chat_template")
    if template is None:
        template = config.get("chat_template")
        if isinstance(template, list):
            named = {entry["name"]: entry["template"] for entry in template}
            template = named.get("default")
    if template is None:
        raise ValueError("no chat template in " + case["tokenizer_config"])
    variables = {}
    for name in SPECIAL_TOKENS:
        text = token_text(config.get(name))
        if text is not None:
            variables[name] = text
    variables.update(messages=case["messages"], tools=case.get("tools"), documents=None,
                     add_generation_prompt=case.get("add_generation_prompt", False))
    return template, variables


def render(env, case):
    try:
        if "tokenizer_config" in case:
            template, variables = chat_variables(case)
        else:
            template, variables = case["template"], case.get("variables", {})
        return {"output": env.from_string(template).render(**variables)}
    except Exception as e:  # every failure is a result the C++ side compares
        return {"error": str(e), "type": type(e).__name__}


def main():
    request = json.load(sys.stdin)
    env = environment()
    results = [render(env, case) for case in request["cases"]]
    json.dump({"results": results}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
