// Which requests are inference: POST to the OpenAI endpoints or Anthropic's Messages API, under
// any path prefix (/v1/... as well as /openai/v1/... or /serving/llama/v1/...). Everything else
// is proxied untouched and not measured.
import type { InferenceApi } from '../measure/sample.ts';

const ROUTE = /\/v1\/(chat\/completions|completions|responses|embeddings|messages)\/?$/;

const APIS: Readonly<Record<string, InferenceApi>> = {
  'chat/completions': 'chat',
  completions: 'completions',
  responses: 'responses',
  embeddings: 'embeddings',
  messages: 'messages',
};

export function inferenceApi(method: string | undefined, url: string | undefined): InferenceApi | undefined {
  if (method !== 'POST' || url === undefined) return undefined;
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const match = ROUTE.exec(path);
  return match === null ? undefined : APIS[match[1]!];
}
