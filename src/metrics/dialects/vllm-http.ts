// The `handler` and `method` of vLLM's HTTP families for a request infermeter forwards without
// measuring it (the pass-through route): vLLM's route templates as its FastAPI app declares them
// (vllm/entrypoints/openai/api_server.py, v0.12), the routes its instrumentator leaves out
// (/metrics, /health, /load, /ping, /version, /server_info) left out too, and any other path
// "none", as prometheus-fastapi-instrumentator names an untemplated route. Both bounded: a
// client's path or method never becomes a label value.

/** vLLM's routes other than the measured inference ones (those are counted from their samples). */
const ROUTES = new Set([
  '/v1/models',
  '/tokenize',
  '/detokenize',
  '/v1/chat/completions',
  '/v1/completions',
  '/v1/responses',
  '/v1/embeddings',
  '/v1/messages',
  '/pooling',
  '/classify',
  '/score',
  '/v1/score',
  '/rerank',
  '/v1/rerank',
  '/v2/rerank',
  '/invocations',
  '/v1/audio/transcriptions',
  '/v1/audio/translations',
  '/v1/load_lora_adapter',
  '/v1/unload_lora_adapter',
]);
const EXCLUDED = new Set(['/metrics', '/health', '/load', '/ping', '/version', '/server_info']);
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']);

/** The handler label of a request path (query included or not); undefined: vLLM does not count it. */
export function vllmHandler(target: string): string | undefined {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  if (EXCLUDED.has(path)) return undefined;
  return ROUTES.has(path) ? path : 'none';
}

/** The method label: the standard methods as sent, any other "OTHER". */
export function vllmMethod(method: string | undefined): string {
  return method !== undefined && METHODS.has(method) ? method : 'OTHER';
}

/** The vllm dialect's passThroughLabels (dialects/index.ts): its handler and method, or undefined for a route vLLM does not count. */
export function vllmPassThroughLabels(target: string, method: string | undefined): readonly [handler: string, method: string] | undefined {
  const handler = vllmHandler(target);
  return handler === undefined ? undefined : [handler, vllmMethod(method)];
}
