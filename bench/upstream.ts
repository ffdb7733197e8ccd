// The benchmark's model server: as cheap and deterministic as it can be, so that what is
// measured is the hop. Streams vLLM-shaped chat chunks; the scenario comes in request headers:
// x-bench-tokens (chunks), x-bench-ttft-ms (delay before the first), x-bench-gap-ms (between).
// Usage chunk when the body asks for it. Prints its port on stdout.
import http from 'node:http';

const head = '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1764500000,"model":"bench-model","choices":[{"index":0,"delta":{"content":"';
const tail = '"},"logprobs":null,"finish_reason":null}]}';
const events = Array.from({ length: 64 }, (_, i) => `data: ${head}tok${i}${tail}\n\n`);
const finish =
  'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1764500000,"model":"bench-model","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}\n\n';
const metrics =
  '# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0",model_name="bench-model"} 0\n';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// BENCH_TIMINGS=1 (bench/arrival-split.ts): for each request with an x-request-id, when its body
// had come and when its first token was written, on the machine's monotonic clock (which every
// process shares); GET /timings hands them over (and forgets them). Bounded.
const timings: string[] | undefined = process.env.BENCH_TIMINGS === '1' ? [] : undefined;
const MAX_TIMINGS = 100_000;

const server = http.createServer({ noDelay: true, keepAliveTimeout: 120_000 }, (req, res) => {
  if (req.method === 'GET' && timings !== undefined && req.url === '/timings') {
    res.end(timings.splice(0).join('\n'));
    return;
  }
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
    res.end(req.url === '/metrics' ? metrics : '{"data":[{"id":"bench-model"}]}');
    return;
  }
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (body += c));
  req.on('end', async () => {
    const arrived = timings === undefined ? 0n : process.hrtime.bigint();
    const tokens = Number(req.headers['x-bench-tokens'] ?? 16);
    const ttft = Number(req.headers['x-bench-ttft-ms'] ?? 0);
    const gap = Number(req.headers['x-bench-gap-ms'] ?? 0);
    const usage = body.includes('"include_usage":true');
    let closed = false;
    res.on('close', () => (closed = true));
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.flushHeaders();
    if (ttft > 0) await sleep(ttft);
    for (let i = 0; i < tokens && !closed; i++) {
      if (i > 0 && gap > 0) await sleep(gap);
      if (i === 0 && timings !== undefined && timings.length < MAX_TIMINGS && typeof req.headers['x-request-id'] === 'string')
        timings.push(`${req.headers['x-request-id']} ${arrived} ${process.hrtime.bigint()}`);
      // Without delays, respect back-pressure so a fast upstream does not buffer without bound.
      if (!res.write(events[i % events.length]!) && gap === 0) await new Promise((r) => res.once('drain', r));
    }
    if (closed) return;
    res.write(finish);
    if (usage)
      res.write(
        `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1764500000,"model":"bench-model","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":${tokens},"total_tokens":${12 + tokens}}}\n\n`,
      );
    res.end('data: [DONE]\n\n');
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`);
});
