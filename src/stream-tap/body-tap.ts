// The tap of a response that is not an event stream: a JSON body kept up to a cap (decoded
// when content-encoded) and read for its usage, finish reason, model and engine timings at its
// end. Only a successful answer is kept; an error body is forwarded unread. What is kept is taken
// from the process's budget for answers as it arrives (INFERMETER_MAX_HELD_ANSWER_BYTES), given
// back at the end or when the response closes: an answer that finds it spent is still relayed
// unchanged, only not read (counted body_unheld), so slow readers of big answers cannot grow
// the heap by a copy each.
import { classifyBody } from '../measure/openai-events.ts';
import type { RequestTimer } from '../measure/request-timer.ts';
import type { Decode } from './body-decoders.ts';
import type { ResponseTap, TapOptions } from './tap-contract.ts';

export function tapBody(timer: RequestTimer, options: TapOptions, wantBody: boolean, decode: Decode | undefined): ResponseTap {
  let chunks: Buffer[] | undefined = wantBody ? [] : undefined;
  const hold = wantBody ? options.answerBudget?.hold() : undefined;
  let size = 0;
  const chunk = (chunk: Buffer): void => {
    timer.responseBody();
    if (chunks === undefined) return;
    size += chunk.length;
    if (size > options.maxBodyBytes) {
      chunks = undefined;
      hold?.release();
      options.problem('body_too_large');
      return;
    }
    if (hold !== undefined && !hold.take(chunk.length)) {
      chunks = undefined;
      hold.release();
      options.problem('body_unheld');
      return;
    }
    chunks.push(chunk);
  };
  const close = (): void => {
    chunks = undefined;
    hold?.release();
  };
  const end = (): void => {
    if (chunks === undefined) return;
    try {
      let body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      chunks = undefined;
      hold?.release();
      if (body.length === 0) return;
      if (decode !== undefined) body = decode(body, options.maxBodyBytes);
      const facts = classifyBody(body.toString('utf8'));
      if (facts.malformed) options.problem('malformed_body');
      if (facts.usage !== undefined) timer.usage(facts.usage);
      if (facts.finishReason !== undefined) timer.finishReason(facts.finishReason);
      if (facts.model !== undefined) timer.responseModel(facts.model);
      if (facts.timings !== undefined) timer.engineTimings(facts.timings);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      options.problem(code === 'ERR_BUFFER_TOO_LARGE' ? 'body_too_large' : 'malformed_body');
    }
  };
  return { chunk, end, close };
}
