// Deterministic tokenizer test corpus for tests/tokenizer/tokenizer_test.cc: prints N generated lines
// (default 2400) and then a fixed list of edge cases, each a JSON string (ASCII-escaped, so \n,
// \r, U+2028 and astral characters survive line-based transport). Seeded PRNG: the same N always
// gives the same corpus.
// Usage: node make_corpus.mjs [N] > corpus.jsonl
const total = Number(process.argv[2] ?? 2400);

// mulberry32: small, fast, fully specified, identical on every platform.
let seed = 0x5eed1234;
function random() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (n) => Math.floor(random() * n);
const pick = (list) => list[int(list.length)];
const repeat = (n, f) => Array.from({ length: n }, f).join("");

const portuguese = ("ação coração você não está pão avó avô três público árvore lição português " +
  "é à às Ângela São Paulo informação saúde órgão também já café útil ônibus pôr põe ninguém " +
  "através cidadão mãe irmã óculos Ñandú façade naïve crème brûlée Größe Straße").split(" ");
const english = ("the quick brown fox jumps over lazy dog hello world server token model cache " +
  "prompt request latency throughput The THE Hello WORLD iPhone McDonald's O'Neil").split(" ");
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE",
  "'M", "'LL", "'D", "'Ll", "'vE", "n't", "’s", "'"];
const cjk = ["你好世界", "我们正在测试分词器", "東京都", "日本語のテキスト", "カタカナ", "ひらがな",
  "한국어 문장입니다", "中文，标点。", "「引用」", "漢字かな交じり文", "안녕하세요", "龍", "𠀀𠀁"];
const emoji = ["😀", "😂", "👍🏽", "❤️", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇧🇷", "🇯🇵", "🇺🇸🇬🇧", "🧑🏿‍🚀",
  "👩‍💻", "✨", "🔥", "🤷‍♂️", "1️⃣", "🏴‍☠️", "🫶", "👁️‍🗨️", "🐈‍⬛"];
const code = [
  "int main(int argc, char** argv) {\n  return 0;\n}",
  "def f(x):\n\treturn x ** 2  # square\n",
  "for (let i = 0; i < n; ++i) { sum += a[i]; }",
  "if (!ok) return Status::Internal(\"bad\");",
  "SELECT id, name FROM users WHERE age >= 18;",
  "<div class=\"x\">&nbsp;</div>",
  "x = {'a': [1, 2, 3], \"b\": None}",
  "#include <vector>\r\nstd::vector<int> v{1,2,3};",
  "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
  "    indented_line = True    ",
  "$ ls -la | grep '^d' && echo \"done\" >> /tmp/log",
  "a_b_c = __init__(self, *args, **kwargs)",
];
const punctuation = ["!!!", "...", "?!?", "---", "«»", "“quoted”", "…", ";;", "((()))", "{[<>]}",
  "@#$%^&*", "~~~", "===", "->", "=>", "::", "/*", "*/", "//", "、。", "¿¡", "§¶", "•", "'''",
  "\"\"\"", ",,,", "__", "-_-"];
const whitespace = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n",
  "\n ", "  \n  ", "\u00a0", "\u3000", "\r", " \t \t", "\n\n\n\n"];
const specials = ["<|eot_id|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
  "<|eot_id", "<|not_a_token|>", "< |eot_id|>",
  // SentencePiece files' tokens (Llama-2, Gemma), their byte tokens and the \u2581 they use for space.
  "<s>", "</s>", "<unk>", "<bos>", "<eos>", "<pad>", "<mask>", "<start_of_turn>", "<end_of_turn>",
  "<0x41>", "<0x0A>", "\u2581", "\u2581\u2581", "<s", "<start_of_image>", "<unused3>",
  // Qwen3, DeepSeek-V3 and gpt-oss added tokens.
  "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
  "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cUser\uff5c>", "<|start|>", "<|channel|>"];
// Characters that SentencePiece vocabularies lack, so byte_fallback spells them as <0xNN> tokens:
// rare CJK, Yi, Tangut, Linear B, cuneiform, private use, planes 3 and 15. All assigned by Unicode
// 14, the version of the Unicode tables in the PCRE2 that pdserve's regex Split uses: a
// character assigned later is unassigned there (not \p{L}, \p{S}, ...).
const rare = ["\u9fd0", "\u9fff", "\u4db5", "\u3400\u3401", "\ua000\ua001", "\u{17000}",
  "\u{10000}\u{10001}", "\u{12000}", "\ue000", "\u{f0000}", "\u{2b820}", "\u{30000}", "\u0d9e",
  "\u{1d11e}", "\u2fd5", "\u{1f9ff}", "\u{1fae0}", "\u{e0041}"];
const scripts = [[0x0400, 0x04ff], [0x0600, 0x06ff], [0x0900, 0x097f], [0x0e00, 0x0e7f],
  [0x0370, 0x03ff], [0x0590, 0x05ff], [0x0300, 0x036f], [0x2000, 0x206f], [0x1f300, 0x1faff],
  [0x00a0, 0x024f], [0x2190, 0x23ff], [0xac00, 0xd7a3], [0x4e00, 0x9fff], [0x20000, 0x2a6df]];

function number() {
  switch (int(5)) {
    case 0: return repeat(1 + int(40), () => String(int(10)));
    case 1: return `${int(100000)}.${int(1000)}`;
    case 2: return `${int(1000)},${String(int(1000)).padStart(3, "0")},${int(1000)}`;
    case 3: return `+55 (11) ${int(100000)}-${int(10000)}`;
    default: return `${int(2030)}-${1 + int(12)}-${1 + int(28)}T${int(24)}:${int(60)}Z`;
  }
}
function randomScript() {
  const [lo, hi] = pick(scripts);
  return repeat(1 + int(8), () => String.fromCodePoint(lo + int(hi - lo + 1)));
}
const sentence = (words, n) => repeat(n, (_, i) => (i ? " " : "") + pick(words));

const makers = [
  () => sentence(portuguese, 3 + int(12)) + pick([".", "!", "?", "", "..."]),
  () => pick(cjk) + pick(["", "，", "。", " "]) + pick(cjk),
  () => repeat(1 + int(5), () => pick(emoji) + pick(["", "", " ", "text", "\n"])),
  () => pick(code) + pick(["", "\n", "  ", "\r\n"]) + pick(code),
  () => repeat(1 + int(6), () => number() + pick([" ", "", "\n", ", ", "x"])),
  () => repeat(1 + int(6), () => pick(whitespace) + pick(["", "word", "a", "é", "1"])) +
    pick(whitespace),
  () => repeat(2 + int(5), () => pick(english) + pick(contractions) + pick([" ", "", ". "])),
  () => repeat(1 + int(6), () => pick(punctuation) + pick(["", " ", "a", "\n"])),
  () => repeat(1 + int(4), () => randomScript() + pick([" ", "", "\n"])),
  () => repeat(3 + int(8), () => pick([pick(portuguese), pick(english), pick(cjk), pick(emoji),
    number(), pick(punctuation), pick(whitespace), pick(contractions), pick(specials)])),
  // SentencePiece: spaces at the start and end and in runs, specials between them, byte fallback.
  () => pick(whitespace) + repeat(1 + int(6), () => pick([pick(english), pick(specials),
    pick(rare), pick(cjk), pick(emoji)]) + pick(whitespace)) + pick(["", " ", "  ", "\n", "\t"]),
  () => pick(specials) + pick(["", " ", "  ", "\n"]) + pick(english) + pick(specials) +
    pick(["", " "]) + repeat(int(4), () => pick(rare)) + pick(["", " ", "\u2581"]),
];

// Fixed edge cases: rare whitespace and case-folding characters where regex engines differ,
// control characters, empty text, added tokens back to back.
const edges = ["", " ", "   ", "\r", "\r\r\n \n\r", "a\u0085 b", "a\ufeff b", "a \u180e b",
  "x\u2028\u2029y", "\u1680\u1680z", "it'\u017f ok'K \u212a", "\u0000a\u0001\u007f",
  "<|eot_id|><|eot_id|>", " <|eot_id|> ", "<|begin_of_text|>\n<|end_of_text|>", "\ud83d\ude00".repeat(40),
  " ".repeat(100) + "x", "9".repeat(301), "a".repeat(500), "\t\t\n\t", "e\u0301\u0301",
  // SentencePiece: the prefix space, added tokens at the edges, spaces next to them.
  "<s>", "<s>Hello", "<s> Hello", "Hello<s>", "Hello <s> world", " <s>", "<s> ", "\n<s>\n",
  "</s></s>", "<bos><start_of_turn>user\nHi<end_of_turn>\n", "\u2581", "\u2581Hello", " \u2581 ",
  "Hello", " Hello", "  Hello", "Hello ", "Hello  ", "\tHello", "\nHello\n", " ", "  ", "\n",
  "\u{10000}", " \u{10000} ", "\u9fd0\u9fd0\u9fd0", "<0x41><0x0A>", "<unk>", " <unk> x",
  "a\u00a0b\u2002c\u3000d", "\u00a0", "<|im_start|>user\n<think>\n\n</think>\n<|im_end|>"];

const lines = [];
for (let i = 0; i < total; ++i) lines.push(makers[i % makers.length]());
lines.push(...edges);
// Escape to ASCII: JSON.stringify leaves U+2028/U+2029 and non-ASCII raw.
const ascii = (s) => JSON.stringify(s).replace(/[\u007f-\uffff]/g,
  (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
process.stdout.write(lines.map(ascii).join("\n") + "\n");
