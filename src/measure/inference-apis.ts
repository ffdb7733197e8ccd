// The API table: every inference API infermeter measures, one row each, with every trait in
// which the APIs differ: the routes the engines serve it on (data-plane/inference-route.ts
// routes by them), whether its OpenAI endpoint takes `stream_options` (usage injection), whether
// it generates tokens, whether it gets a goodput verdict, its canonical route (AOM's `path`,
// vLLM's `handler`) and its OpenTelemetry operation and provider. No module compares an API's
// name: each reads its row. A new endpoint is one row here, plus an event reader where its
// answer has a shape no reader knows (the response tap picks the reader by the answer's content
// type, never by the API). The table is a value passed down (startInfermeter's `apiTable`,
// this one by default), never mutated at run time: a test adds an API by passing
// [...INFERENCE_APIS, its row] (test/unit/api-table.test.ts).

/** How an engine serves a route: as the API's OpenAI-compatible endpoint, or as a route of its own (never injected into). */
export type RouteKind = 'openai' | 'own';

export interface InferenceApiRow {
  /** Its name: the sample's `api`, the usage record's `route`, a goodput exclusion's reason when it gets no verdict. */
  readonly name: string;
  /**
   * Its routes, by the path's last segments (after any prefix): how engines serve each with /v1
   * before it and without (undefined: not an inference route without /v1).
   */
  readonly routes: Readonly<Record<string, readonly [v1: RouteKind, bare: RouteKind | undefined]>>;
  /** Its OpenAI endpoint takes `stream_options`: usage may be injected into its streams. */
  readonly streamOptions: boolean;
  /**
   * It generates tokens (embeddings do not): its sampling parameters are observed (vLLM's
   * `request_params_*`), and a request cut after its output began left prompt tokens uncounted.
   */
  readonly generates: boolean;
  /** It gets a goodput verdict; otherwise its requests are excluded under its name. */
  readonly goodput: boolean;
  /** Its canonical route, the AOM `path` and vLLM `handler` label: a client's prefix cannot add series. */
  readonly path: string;
  /** Its `gen_ai.operation.name`: the GenAI conventions' well-known value (the Responses and Messages APIs': chat, as they name it). */
  readonly otelOperation: string;
  /** Its `gen_ai.provider.name` where the configured one is the default `openai` (which names the API's flavour). */
  readonly otelProvider?: string;
}

// A route's [with /v1, without]: OpenAI's both ways; OpenAI's under /v1 and llama-server's own
// without it; an engine's own both ways.
const OPENAI = ['openai', 'openai'] as const;
const OPENAI_V1 = ['openai', 'own'] as const;
const OWN = ['own', 'own'] as const;

export const INFERENCE_APIS = [
  {
    name: 'chat',
    // vLLM's SageMaker `/invocations` serves a chat, completions or embeddings body by its shape:
    // counted as chat (its label must not depend on the body), never injected into.
    routes: { 'chat/completions': OPENAI, invocations: OWN, 'api/chat': OWN },
    streamOptions: true,
    generates: true,
    goodput: true,
    path: '/v1/chat/completions',
    otelOperation: 'chat',
  },
  {
    name: 'completions',
    // llama-server's `/completion(s)` and `/infill`, SGLang's and TGI's `/generate(_stream)`, Ollama's `/api/generate`.
    routes: {
      completions: OPENAI_V1,
      completion: OWN,
      infill: OWN,
      generate: OWN,
      generate_stream: OWN,
      'api/generate': OWN,
    },
    streamOptions: true,
    generates: true,
    goodput: true,
    path: '/v1/completions',
    otelOperation: 'text_completion',
  },
  {
    name: 'responses',
    routes: { responses: OPENAI },
    streamOptions: false,
    generates: true,
    goodput: true,
    path: '/v1/responses',
    otelOperation: 'chat',
  },
  {
    name: 'embeddings',
    routes: { embeddings: OPENAI_V1, embedding: OWN, 'api/embed': OWN, 'api/embeddings': OWN },
    streamOptions: false,
    generates: false,
    goodput: false,
    path: '/v1/embeddings',
    otelOperation: 'embeddings',
  },
  {
    // Anthropic's Messages API; `/messages` without /v1 is no engine's.
    name: 'messages',
    routes: { messages: ['openai', undefined] },
    streamOptions: false,
    generates: true,
    goodput: true,
    path: '/v1/messages',
    otelOperation: 'chat',
    otelProvider: 'anthropic',
  },
] as const satisfies readonly InferenceApiRow[];

/** The names of the real table's rows (a test's own table may add names this type does not list). */
export type InferenceApi = (typeof INFERENCE_APIS)[number]['name'];

/** An API table, read: its rows, and the row of a name. */
export interface InferenceApis {
  readonly rows: readonly InferenceApiRow[];
  /** The row of a sample's `api` (a Map lookup); undefined only for a name of another table. */
  of(name: string): InferenceApiRow | undefined;
}

/** `table`, read; refuses two rows of one name. */
export function inferenceApis(table: readonly InferenceApiRow[] = INFERENCE_APIS): InferenceApis {
  const rows = new Map<string, InferenceApiRow>();
  for (const row of table) {
    if (rows.has(row.name)) throw new Error(`two inference APIs named ${row.name} in the API table`);
    rows.set(row.name, row);
  }
  return { rows: table, of: (name) => rows.get(name) };
}

/** The real table, read. */
export const REAL_APIS: InferenceApis = inferenceApis();
