// Conformance of jinja/template.h with Python's Jinja2 in transformers' environment: each case
// (a template and its variables) is rendered by both, through tests/tools/
// render_chat_template.py, and must give the same bytes, or both fail (with the same message
// when the template calls raise_exception).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "jinja/builtins.h"
#include "jinja/template.h"
#include "tests/jinja/python_reference.h"

namespace pdserve::jinja {
namespace {

using ordered_json = nlohmann::ordered_json;

const ordered_json& Variables() {
  static const ordered_json kVariables = ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "  Sys  "},
                 {"role": "user", "content": "Hi\nthere"},
                 {"role": "assistant", "content": "Hello!"}],
    "d": {"b": 1, "a": [1, 2.5, "x", null, true]},
    "s": "Hello World", "n": 7, "f": 2.5, "e": [],
    "u": "h\u00e9llo w\u00f6rld \u00df \u01c5 \ufb01",
    "tools": [{"type": "function", "function": {"name": "get_weather",
               "description": "Weather in a city \u2600",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}],
    "builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"],
    "calls": [{"role": "assistant", "content": null,
               "tool_calls": [{"type": "function", "function": {"name": "f",
                               "arguments": {"x": 1, "y": [true, null]}}}]}]
  })");
  return kVariables;
}

// Whitespace control, comments and raw blocks with trim_blocks and lstrip_blocks.
const std::vector<std::string> kWhitespace = {
    "a\n{% if true %}\nb\n{% endif %}\nc",
    "  {% if true %}x{% endif %}  \n  y",
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "{% for m in messages %}\n  {{ m.role }}\n{% endfor %}\n",
    "  {%+ if true %}x{% endif %}",
    "{# comment #}\nA{#- c -#}  B  {# c2 #}\n\nC",
    "{{ 'x' }}\n{{- 'y' -}}\n  z",
    "line1\r\nline2\r{{ 'a' }}\n\n",
    "  {# c #}\n  x",
    "{% raw %}{{ not parsed }}{% endraw %}",
    "  {% raw -%}  {{ x }}  {%- endraw %}\nafter",
    "\t{%- if true %}\n\tx\n\t{%- endif %}\n",
    "a {% if true %} b {% endif %} c",
    "{%- set x = 1 -%}\n\n  {{ x }}",
    "{{ 'a' }}   \n  {% if true %}b{% endif %}",
    "{% if true %}   {% endif %}x",
    "a\n",
    "a\n\n",
    "{% if true +%}\nkeep{% endif %}",
    "{#+ c +#}\n{{ 'v' }}",
    "\u00a0{% if true %}x{% endif %}\n\u3000 {% if true %}y{% endif %}",
    "{% if true -%}\u3000\u00a0\n z{% endif %}",
    "x {{ 1 }}  {% if true %}y{% endif %}",
    "{# a %} b }} #}c",
    "{{ '}}' }}{{ {'a': {'b': 1}} }}{% set q = {'a': 1}%}{{ q }}",
    "\n\n  {% for i in [1, 2] %}\n    {{ i }}\n  {% endfor %}\n\n",
    "{%- for i in [1, 2] -%}\n  {{- i -}}\n{%- endfor -%}",
    "{% for i in [1] %}\r\n  a\r\n{% endfor %}\r\n",
    "<{%- raw -%} \n x \n {%- endraw -%}>",
    "  {%- raw %}r{% endraw +%}\n  {% if 1 %}\n{% endif %}",
    "{{- 'a' }}\n  {{ 'b' -}}  \n  {{ 'c' }}",
    "\t\t{% macro m() %}\n\t\tbody\n\t\t{% endmacro %}\n{{ m() }}",
};

const std::vector<std::string> kExpressions = {
    "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} "
    "{{ -7 % 3 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
    "{{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.0e-5 }} {{ 123456789.123 }} {{ 2.5 * 2 }} "
    "{{ 1_000 }} {{ 0x1F }} {{ 0b101 }} {{ 0o17 }} {{ 1e300 * 1e10 }} {{ 0.0001 }} {{ 1.5e-7 }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ 2.0 ~ x }}",
    "{{ 'ab' * 3 }}{{ [1] * 2 }}{{ [1, 2] + [3] }}{{ (1, 2) + (3,) }}{{ 2 * 'x' }}",
    "{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'a' < 'b' }}{{ [1, 2] < [1, 3] }}{{ 1 == 1.0 }}"
    "{{ true == 1 }}{{ none == none }}{{ 'a' != 'b' }}{{ [1, [2]] == [1, [2]] }}{{ (1,) == [1] }}",
    "{{ 'ell' in s }}{{ 'x' not in s }}{{ 2 in [1, 2] }}{{ 'b' in d }}{{ 'z' in d }}{{ 1 in x }}",
    "{{ n and 'yes' }}|{{ 0 or 'default' }}|{{ e or 'empty' }}|{{ not e }}|{{ none or false }}",
    "{{ 'y' if n > 5 else 'n' }}{{ 'y' if n > 50 }}|{{ 'a' if false else 'b' if false else 'c' }}",
    "{{ -n }}{{ +f }}{{ -f|abs }}{{ -3|abs }}{{ - -n }}",
    "{{ [1, 'a', none, true, 1.5, {'k': [1, (2,)]}] }}{{ (1,) }}{{ () }}{{ {} }}"
    "{{ {'a': 'b', 'c': none} }}{{ 1, 2 }}",
    "{{ \"it's\" }}{{ [\"it's\", 'say \"hi\"', 'both \\' \"'] }}",
    "{{ ['\\n\\t\\x00\\x7f', '\\u00e9', '\\u2028', '\\U0001F600', '\\\\', '\\xa0'] }}",
    "{{ d }}{{ d.a }}{{ d['a'][1] }}{{ d.a.1 }}{{ d.missing }}|{{ d['missing'] }}|{{ d.a[-1] }}",
    "{{ messages[0].role }}{{ messages[-1]['content'] }}{{ messages[5] }}|{{ messages|length }}",
    "{{ s[1:4] }}|{{ s[::-1] }}|{{ s[-5:] }}|{{ s[:-6] }}|{{ s[::2] }}|{{ [1,2,3,4][1::2] }}|"
    "{{ u[1:3] }}|{{ u[-2] }}|{{ s[100:] }}|{{ [1,2,3][::-2] }}|{{ s[-100:2] }}|{{ (1,2,3)[1:] }}",
    "{{ messages[1:] | map(attribute='role') | list }}",
    "{{ x }}|{{ x is defined }}|{{ x is undefined }}|{{ x|default('dflt') }}|"
    "{{ none|default('d') }}|{{ ''|default('d', true) }}|{{ x|d }}|{{ x|d(1) + 1 }}",
    "{% if x %}t{% else %}f{% endif %}{% for i in x %}{{ i }}{% else %}empty{% endfor %}",
    "{{ 'a' 'b' }}{{ 'a\\tb' }}|{{ \"q\\\"q\" }}|{{ 'oct\\101' }}|{{ 'bad\\d' }}|"
    "{{ 'x\\\ny' }}|{{ 'nl\\\\n' }}|{{ '\\u00e9\\x41' }}",
    "{{ loop }}|{{ [1,2][5] is defined }}|{{ none }}{{ None }}{{ True }}{{ false }}",
    "{{ 9999999999 * 10 }}{{ 2 ** 62 }}{{ -2 ** 2 }}{{ (-2) ** 2 }}",
};

const std::vector<std::string> kStatements = {
    "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
    "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
    "{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }}"
    "{{ loop.previtem.role if loop.previtem is defined }}/"
    "{{ loop.nextitem.role if not loop.last }};{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}"
    "{% for k, v in d|items %}{{ k }}{% endfor %}{% for c in 'h\u00e9llo' %}{{ c }}.{% endfor %}",
    "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}"
    "{% break %}{% endif %}{{ i }}{% endfor %}",
    "{% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{{ j }} {% endfor %}"
    "{{ loop.index }}|{% endfor %}",
    "{% for a, (b, c) in [(1, (2, 3)), [4, [5, 6]]] %}{{ a }}{{ b }}{{ c }}{% endfor %}",
    "{% for i in range(3) %}{{ loop.cycle('odd', 'even') }}{% endfor %}"
    "{% for i in [1,1,2] %}{{ loop.changed(i) }}{% endfor %}{% for i in [1] %}{{ loop.depth }}"
    "{% endfor %}",
    "{{ range(3) | list }}{{ range(1, 10, 3) | list }}{{ range(5, 0, -2) | join(',') }}",
    "{% set count = 0 %}{% for i in range(3) %}{% set count = count + 1 %}{{ count }}"
    "{% endfor %}{{ count }}",
    "{% set ns = namespace(count=0, found=false) %}{% for i in range(3) %}"
    "{% set ns.count = ns.count + i %}{% endfor %}{{ ns.count }}{{ ns.found }}{{ ns }}"
    "{{ ns['count'] }}",
    "{% if true %}{% set y = 5 %}{% endif %}{{ y }}",
    "{% for i in range(3) %}{% if i == 1 %}{% set z = 5 %}{% endif %}{{ z }}{% endfor %}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}",
    "{% set block %}  inner {{ s }}  {% endset %}[{{ block }}]"
    "{% set up | upper %}abc{% endset %}{{ up }}",
    "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|",
    "{% filter upper %}hello {{ s }}{% endfilter %}",
    "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
    "{{ greet('Bob') }} {{ greet('Al', '?') }} {{ greet(punct='.', name='X') }}",
    "{% macro m(a) %}[{{ a }}]{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}"
    "{{ m() }}",
    "{% macro render(msg) %}{{ msg.role|upper }}: {{ msg.content|trim }}\n{% endmacro %}"
    "{% for m in messages %}{{ render(m) }}{% endfor %}",
    "{% macro m() %}{{ y }}{% endmacro %}{% set y = 3 %}{{ m() }}",
    "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}"
    "{% endmacro %}{{ fact(5) }}",
    "{% macro m(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ m('x') }}",
    "{% generation %}gen {{ s }}{% endgeneration %}",
    "{% print s, n %}",
};

const std::vector<std::string> kFilters = {
    "{{ s|upper }}{{ s|lower }}{{ 'hello wORLD-foo(bar)'|title }}{{ 'hELLO world'|capitalize }}"
    "{{ u|upper }}{{ u|title }}{{ u|capitalize }}{{ u|lower }}{{ none|upper }}{{ 5|lower }}",
    "[{{ '  \\n x y \\t '|trim }}][{{ 'xxhixx'|trim('x') }}][{{ s|replace('o', '0') }}]"
    "[{{ s|replace('o', '0', 1) }}][{{ 'abc'|replace('', '-') }}][{{ 12|replace(1, 3) }}]",
    "{{ messages|map(attribute='role')|join(', ') }}|{{ [1,2,3]|join }}|"
    "{{ messages|join('|', attribute='role') }}|{{ ['a', none, 1]|join('-') }}|"
    "{{ messages|map(attribute='nope', default='-')|join }}|{{ ['a','b']|map('upper')|join }}",
    "{{ messages|selectattr('role', 'equalto', 'user')|list|length }}"
    "{{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }}"
    "{{ [0,1,2,none,'']|select|list }}{{ [1,2,3,4]|select('odd')|list }}"
    "{{ [1,2,3,4]|reject('even')|list }}{{ [1,5,9]|select('gt', 4)|list }}",
    "{{ messages|selectattr('missing')|list }}"
    "{{ messages|selectattr('role', 'in', ['user', 'system'])|map(attribute='content')"
    "|map('trim')|list }}",
    "{% if messages|selectattr('role', 'equalto', 'nobody') %}truthy{% endif %}"
    "{{ messages|selectattr('role', 'equalto', 'nobody')|first is defined }}",
    "{{ [3,1,2]|sort }}{{ ['b','A','c']|sort }}{{ ['b','A','c']|sort(case_sensitive=true) }}"
    "{{ [3,1,2]|sort(reverse=true) }}{{ messages|sort(attribute='role')|map(attribute='role')"
    "|list }}{{ [[2, 'b'], [1, 'z'], [2, 'a']]|sort }}",
    "{{ [1,2,2,'a','A',1.0]|unique|list }}{{ [3,1,2]|min }}{{ [3,1,2]|max }}{{ ['b','A']|max }}"
    "{{ []|min }}|{{ [1,2,3]|sum }}{{ [1.5,2]|sum }}{{ messages|map(attribute='role')|unique"
    "|list|length }}",
    "{{ [1,2,3]|first }}{{ [1,2,3]|last }}{{ 'abc'|first }}{{ 'abc'|last }}{{ []|first }}|"
    "{{ d|first }}{{ d|list }}{{ 'ab'|list }}{{ [1,2]|reverse|list }}{{ 'abc'|reverse }}"
    "{{ d|length }}{{ 'h\u00e9llo'|length }}{{ s|count }}{{ x|length }}",
    "{{ '42'|int }}{{ '42.7'|int }}{{ 'x'|int }}{{ 'x'|int(-1) }}{{ 3.9|int }}{{ true|int }}"
    "{{ none|int }}{{ '0x1A'|int(0, 16) }}{{ ' 7 '|int }}{{ '1_000'|int }}|{{ '2.5'|float }}"
    "{{ 'x'|float }}{{ 3|float }}{{ '1e3'|float }}{{ ' inf '|float }}{{ '-7'|int }}",
    "{{ 2.567|round }}{{ 2.567|round(2) }}{{ 2.5|round }}{{ 3.5|round }}{{ 2.675|round(2) }}"
    "{{ 7|round }}{{ 2.1|round(0, 'ceil') }}{{ 2.9|round(1, 'floor') }}",
    "{{ 'line1\\nline2\\n\\nline4'|indent }}|{{ 'a\\nb'|indent(2, true) }}|"
    "{{ 'a\\n\\nb'|indent('> ', blank=true) }}|{{ 'x'|indent }}|{{ 'a\\nb\\n'|indent(1) }}",
    "{{ 'hello'|center(11) }}|{{ 'one two  three'|wordcount }}|"
    "{{ '<a href=\"x\">&\\'</a>'|e }}|{{ '<b>'|escape }}|{{ '<b>'|safe }}|{{ 42|string }}"
    "{{ [1]|string }}",
    "{{ d|tojson }}|{{ messages|tojson }}|{{ '\u00e9\"\\n\\u2028\\x01'|tojson }}|"
    "{{ [1, 2.5, none, true]|tojson }}|{{ d|tojson(indent=2) }}|"
    "{{ {'b': 1, 'a': {}}|tojson(sort_keys=true) }}|{{ {'a': []}|tojson(indent=4) }}|"
    "{{ '\u00e9\\U0001F600'|tojson(ensure_ascii=true) }}|"
    "{{ [1,2]|tojson(separators=(',', ':')) }}|{{ 1e16|tojson }}",
    "{{ d|dictsort }}{{ {'b': 2, 'A': 1, 'c': 0}|dictsort }}"
    "{{ {'b': 2, 'a': 1}|dictsort(by='value', reverse=true) }}",
    "{{ d|items|list }}{{ d.keys()|list }}{{ d.values()|list }}{{ d.get('b') }}"
    "{{ d.get('zz') }}{{ d.get('zz', 5) }}",
    "{{ 'abc'|attr('upper') is callable }}{{ messages[0]|attr('role') }}|",
};

const std::vector<std::string> kTests = {
    "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}"
    "{{ none is none }}{{ s is string }}{{ d is mapping }}{{ 1 is number }}{{ 1.0 is number }}"
    "{{ true is number }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}"
    "{{ true is boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}",
    "{{ e is sequence }}{{ s is sequence }}{{ d is sequence }}{{ 1 is sequence }}"
    "{{ s is iterable }}{{ x is iterable }}{{ 1 is iterable }}{{ 'a' is lower }}"
    "{{ 'A' is upper }}{{ 2 is in [1, 2] }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}{{ 2 is gt 1 }}"
    "{{ 2 is ge 2 }}{{ 1 is lt 2 }}{{ 1 is le 0 }}{{ 'upper' is filter }}{{ 'odd' is test }}"
    "{{ none is sameas none }}{{ x is callable }}{{ range is callable }}{{ 1 is == 1 }}",
    "{{ 1 is not none }}{{ x is not defined }}{{ not x is defined }}{{ d is not mapping }}",
};

const std::vector<std::string> kMethods = {
    "{{ '  a b  '.strip() }}|{{ '  a b  '.lstrip() }}|{{ '  a b  '.rstrip() }}|"
    "{{ 'xxaxx'.strip('x') }}|{{ '\\n\\nhi\\n'.lstrip('\\n') }}|{{ '\\u3000 hi\\xa0'.strip() }}",
    "{{ 'a,b,,c'.split(',') }}{{ ' a  b c '.split() }}{{ 'a b c'.split(' ', 1) }}"
    "{{ 'a b c'.rsplit(' ', 1) }}{{ 'a<t>b<t>c'.split('<t>')[-1] }}{{ ''.split() }}"
    "{{ ''.split(',') }}{{ 'a\\nb\\r\\nc'.splitlines() }}{{ ' a b '.split(None, 1) }}"
    "{{ ' a b '.rsplit(maxsplit=1) }}",
    "{{ s.startswith('Hell') }}{{ s.endswith('ld') }}{{ s.startswith(('x', 'H')) }}"
    "{{ s.startswith('World', 6) }}{{ s.lower() }}{{ s.upper() }}{{ s.title() }}"
    "{{ 'hello world'.capitalize() }}{{ s.replace('l', 'L') }}{{ s.replace('l', 'L', 2) }}"
    "{{ s.find('o') }}{{ s.rfind('o') }}{{ s.find('z') }}{{ u.find('w') }}{{ s.count('l') }}"
    "{{ '-'.join(['a', 'b']) }}{{ s.swapcase() }}{{ u.title() }}",
    "{{ '123'.isdigit() }}{{ 'abc'.isalpha() }}{{ 'a1'.isalnum() }}{{ '  '.isspace() }}"
    "{{ 'abc'.islower() }}{{ 'ABC'.isupper() }}{{ 'a'.center(5, '*') }}{{ 'a'.ljust(3) }}|"
    "{{ 'a'.rjust(3, '.') }}{{ '42'.zfill(5) }}{{ '-42'.zfill(5) }}"
    "{{ 'prefix_x'.removeprefix('prefix_') }}{{ 'a=b=c'.partition('=') }}"
    "{{ 'a=b=c'.rpartition('=') }}{{ [1, 2, 1].count(1) }}{{ [1, 2].index(2) }}",
    "{% set c = '<think>\\nabc\\n</think>\\n\\nanswer' %}"
    "{{ c.split('</think>')[-1].lstrip('\\n') }}|"
    "{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
    "{{ messages[0].items() | list | length }}{{ d['items'] is callable }}",
};

// Tool-calling constructs of Llama 3.1, Qwen and Hermes templates.
const std::vector<std::string> kTools = {
    "{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}"
    "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}"
    "{{- \"Tools: \" + builtin_tools | reject('equalto', 'code_interpreter') | join(\", \") }}",
    "{%- for t in tools %}{{- t | tojson(indent=4) }}{{- \"\\n\\n\" }}{%- endfor %}",
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim"
    " %}{%- set messages = messages[1:] %}{%- endif %}[{{ system_message }}]{{ messages|length }}",
    "{%- for message in calls %}{%- if message.tool_calls %}{%- for tool_call in message.tool_calls"
    " %}{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}"
    "{%- endif %}<tool_call>\n{\"name\": \"{{ tool_call.name }}\", \"arguments\": "
    "{{ tool_call.arguments | tojson }}}\n</tool_call>{%- endfor %}{%- endif %}{%- endfor %}",
    "{{ calls[0].content is none }}{{ calls[0]['content'] is not none }}"
    "{{ tools[0].function.parameters.properties | list }}{{ tools | map(attribute='function.name')"
    " | list }}{{ tools[0]|tojson(separators=(',', ':'), sort_keys=true) }}",
    "{%- if tools is not none and tools|length > 0 %}{{ '<tools>' }}{% for tool in tools %}"
    "{{ '\\n' ~ (tool.function if tool.function is defined else tool) | tojson }}{% endfor %}"
    "{{ '\\n</tools>' }}{% endif %}",
};

// Templates that must fail in both engines.
const std::vector<std::string> kErrors = {
    "{{ raise_exception('Roles must alternate user/assistant/user/assistant/...') }}",
    "{% if true %}{{ raise_exception('inside ' ~ s) }}{% endif %}",
    "{{ x.y }}",
    "{{ 1 + 'a' }}",
    "{{ 'a' + 1 }}",
    "{{ 1 / 0 }}",
    "{{ [1,2].append(3) }}",
    "{{ x() }}",
    "{% for a, b in [1] %}{% endfor %}",
    "{% for a, b in [[1, 2, 3]] %}{% endfor %}",
    "{{ messages|selectattr('role', 'nosuchtest')|list }}",
    "{{ 5 < 'a' }}",
    "{{ undefined_thing + 1 }}",
    "{% set n2 = 1 %}{% set n2.x = 2 %}",
    "{% if x %}no end",
    "{{ 1 + }}",
    "{% endfor %}",
    "{{ 'unterminated }}",
    "{{ x|tojson }}",
    "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{% endmacro %}{{ m(b=2) }}",
    "{{ messages|selectattr('role')|length }}",
    "{{ messages[9].role }}",
    "{{ x|int }}",
    "{{ 'abc'.split('') }}",
    "{{ 1 is foo }}",
    "{{ 1|foo }}",
    "{% foo %}",
    "{% for i in 5 %}{% endfor %}",
    "{{ 'a' < 1 }}",
    "{{ range(1000000)|length }}",
    "{{ [1,2]|last }}{{ messages|map(attribute='role')|last }}",
    "{% break %}",
    "{{ 'a'|indent }}{{ 5|indent }}",
    "{{ {}['a'].b }}",
    "{{ none.x.y }}",
    "{% set x = 1 %}{{ x.y.z }}",
    "{{ d.a[1:2:0] }}",
};

struct Case {
  std::string group;
  std::string source;
};

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const auto& [group, list] :
       std::vector<std::pair<std::string, const std::vector<std::string>*>>{
           {"whitespace", &kWhitespace},
           {"expressions", &kExpressions},
           {"statements", &kStatements},
           {"filters", &kFilters},
           {"tests", &kTests},
           {"methods", &kMethods},
           {"tools", &kTools},
           {"errors", &kErrors},
       }) {
    for (const std::string& source : *list) cases.push_back({group, source});
  }
  return cases;
}

Result<std::string> RenderOurs(const std::string& source) {
  PDSERVE_ASSIGN_OR_RETURN(Template t, Template::Parse(source, "case"));
  t.AddFunction("raise_exception", RaiseExceptionFunction());
  t.AddFunction("strftime_now", StrftimeNowFunction());
  return t.Render(Variables());
}

TEST(ConformanceTest, RendersLikePythonJinja2) {
  const std::vector<Case> cases = AllCases();
  ordered_json request = {{"cases", ordered_json::array()}};
  for (const Case& c : cases) {
    request["cases"].push_back({{"template", c.source}, {"variables", Variables()}});
  }
  auto reference = testing::RenderWithPython(request);
  ASSERT_TRUE(reference.has_value());
  int matched = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const testing::ReferenceResult& python = (*reference)[i];
    Result<std::string> ours = RenderOurs(c.source);
    SCOPED_TRACE(c.group + " case " + std::to_string(i) + ": " + c.source);
    if (c.group == "errors") {
      EXPECT_FALSE(python.ok) << "Python rendered: " << python.output;
    }
    if (!python.ok) {
      EXPECT_FALSE(ours.ok()) << "Python failed (" << python.type << ": " << python.error
                              << ") but ours rendered: " << *ours;
      if (!ours.ok() && python.type == "TemplateError") {
        EXPECT_EQ(ours.status().message(), python.error);
      }
      if (!ours.ok()) ++matched;
      continue;
    }
    if (!ours.ok()) {
      ADD_FAILURE() << "ours failed: " << ours.status().ToString() << "\nPython: " << python.output;
      continue;
    }
    EXPECT_EQ(*ours, python.output) << testing::FirstDifference(*ours, python.output);
    if (*ours == python.output) ++matched;
  }
  std::printf("%d of %zu cases match Python's Jinja2\n", matched, cases.size());
}

}  // namespace
}  // namespace pdserve::jinja
