// The stream tap's cap on one server-sent event (INFERMETER_MAX_EVENT_BYTES) at its edge: a
// partial event of exactly the cap waits for its end and is measured; one byte more and the tap
// stops reading that stream (event_too_large). The same with LF line ends (the fast byte path)
// and CRLF ones (the splitter's general path). An event that arrives whole in one read is never
// held, so never too large: with socket reads of at most 64 KiB and a cap of at least 1 KiB the
// cap bounds what is held, which is what it is for.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runTap } from '../helpers/tap-harness.ts';

const event = (nl: string) => `data: {"choices":[{"index":0,"delta":{"content":"${'x'.repeat(200)}"}}]}${nl}${nl}`;

describe('event size cap', () => {
  for (const [path, nl, lead] of [
    ['fast path', '\n', ''],
    ['general path', '\r\n', ': keep-alive\r\n\r\n'],
  ] as const) {
    it(`${path}: a partial event of exactly the cap is read, one byte more is not`, () => {
      const whole = event(nl);
      const head = whole.slice(0, -2 * nl.length); // the event but its blank line: it must wait
      // The partial event in one chunk, and in two (the second adds to what waits).
      for (const pieces of [[head], [head.slice(0, 100), head.slice(100)]]) {
        const run = (max: number) =>
          runTap({ api: 'chat', chunks: [lead, ...pieces, nl + nl, whole].filter((c) => c !== '').map((c) => Buffer.from(c)), maxEventBytes: max });
        const at = run(head.length);
        assert.deepEqual([at.sample.tokenEvents, at.problems], [2, []], `cap ${head.length} = the partial event, in ${pieces.length} chunks`);
        const over = run(head.length - 1);
        assert.deepEqual(
          [over.sample.tokenEvents, over.problems],
          [0, ['event_too_large']],
          `cap ${head.length - 1}: one byte under the partial event, in ${pieces.length} chunks`,
        );
      }
      const oneChunk = runTap({ api: 'chat', chunks: [Buffer.from(whole)], maxEventBytes: 16 });
      assert.deepEqual([oneChunk.sample.tokenEvents, oneChunk.problems], [1, []], 'a whole event in one chunk is not held');
    });
  }
});
