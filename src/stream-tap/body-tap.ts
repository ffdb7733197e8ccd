// The tap of a response that is not an event stream: a JSON body kept up to a cap (decoded
// when content-encoded) and read for its usage, finish reason, model and engine timings at its
// end. Only a successful answer is kept; an error body is forwarded unread.
import { classifyBody } from '../measure/openai-events.ts';
import type { RequestTimer } from '../measure/request-timer.ts';
import type { Decode } from './body-decoders.ts';
import type { ResponseTap, TapOptions } from './tap-contract.ts';

function ignore(): void {}

export function tapBody(timer: RequestTimer, options: TapOptions, wantBody: boolean, decode: Decode | undefined): ResponseTap {
  let chunks: Buffer[] | undefined = wantBody ? [] : undefined;
  let size = 0;
  const chunk = (chunk: Buffer): void => {
    timer.responseBody();
    if (chunks === undefined) return;
    size += chunk.length;
    if (size > options.maxBodyBytes) {
      chunks = undefined;
      options.problem('body_too_large');
      return;
    }
    chunks.push(chunk);
  };
  const end = (): void => {
    if (chunks === undefined) return;
    try {
      let body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      chunks = undefined;
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
  return { chunk, end, close: ignore };
}
