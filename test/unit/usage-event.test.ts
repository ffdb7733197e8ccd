// The usage record: a CloudEvents 1.0 event in structured JSON mode whose required attributes
// hold what the specification asks, built from a request's sample without inventing a figure.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { defaultSource } from '../../src/ledger/usage-config.ts';
import { createUsageWriter } from '../../src/ledger/ledger.ts';
import { billingBasis, ledgerUsageSource, usageEvent, USAGE_DATA_SCHEMA, USAGE_EVENT_TYPE, type UsageEvent } from '../../src/ledger/usage-event.ts';
import type { RequestSample } from '../../src/measure/sample.ts';

const SAMPLE: RequestSample = {
  api: 'chat',
  model: 'llama',
  stream: true,
  tenant: 'team-a',
  requestId: 'client-1',
  status: 200,
  outcome: 'success',
  failure: undefined,
  cancelPhase: undefined,
  ttfb: 0.01,
  streamed: true,
  outputSeen: true,
  ttft: 0.0205,
  lastToken: 0.5,
  e2e: 0.6,
  duration: 0.6,
  backpressure: 0,
  tpot: { seconds: 0.01, tokens: 9 },
  promptTokens: 12,
  completionTokens: 10,
  usageSource: 'upstream',
  reasoningTokens: 4,
  tokenEvents: 10,
  finishReason: 'stop',
};

// RFC 3339 date-time (section 5.6), as CloudEvents' `time` requires.
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
// RFC 3986 URI-reference: no spaces or controls, and no character outside its set.
const URI_REFERENCE = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]+$/;

/** The CloudEvents 1.0 core specification's required context attributes and the types it gives the optional ones. */
function assertCloudEvent(e: Record<string, unknown>): void {
  assert.equal(e.specversion, '1.0');
  for (const name of ['id', 'source', 'type'] as const) assert.ok(typeof e[name] === 'string' && (e[name] as string).length > 0, `${name} a non-empty string`);
  assert.match(e.source as string, URI_REFERENCE, 'source a URI-reference');
  assert.match(e.time as string, RFC3339, 'time RFC 3339');
  assert.ok(typeof e.subject === 'string' && e.subject.length > 0);
  assert.match(e.dataschema as string, /^[a-z][a-z0-9+.-]*:/, 'dataschema an absolute URI');
  assert.equal(e.datacontenttype, 'application/json');
  // Attribute names: lower-case letters and digits only (the spec's naming rule).
  for (const name of Object.keys(e)) assert.match(name, /^[a-z0-9]{1,20}$/);
  assert.equal(typeof e.data, 'object');
}

describe('usage record', () => {
  it('is a CloudEvents 1.0 event with the schema of docs/usage-records.md', () => {
    const e = usageEvent(SAMPLE, { eventId: 'e1', requestId: 'client-1', seq: 7, processStartId: 'p1' }, 'infermeter://host-1:1025', new Date(0));
    assertCloudEvent(e as unknown as Record<string, unknown>);
    assert.equal(e.type, USAGE_EVENT_TYPE);
    assert.equal(e.dataschema, USAGE_DATA_SCHEMA);
    assert.equal(e.subject, 'team-a');
    assert.deepEqual(e.data, {
      request_id: 'client-1',
      model: 'llama',
      tenant: 'team-a',
      route: 'chat',
      stream: true,
      status: 200,
      outcome: 'success',
      failure: null,
      cancel_phase: null,
      prompt_tokens: 12,
      completion_tokens: 10,
      reasoning_tokens: 4,
      cached_prompt_tokens: null,
      usage_source: 'engine',
      billing_basis: 'engine',
      cost_nanos: null,
      price_version: null,
      ttft_ms: 20.5,
      e2e_ms: 600,
      client_backpressure_ms: 0,
      seq: 7,
      process_start_id: 'p1',
    });
  });

  it("is the model's without tenants, and leaves unknown figures null", () => {
    const { tenant: _t, ...noTenant } = SAMPLE;
    const sample: RequestSample = {
      ...noTenant,
      promptTokens: undefined,
      completionTokens: undefined,
      reasoningTokens: undefined,
      usageSource: 'none',
      tokenEvents: 0,
    };
    const e = usageEvent(sample, { eventId: 'e2', requestId: 'e2', seq: 1, processStartId: 'p1' }, 'x', new Date(0));
    assert.equal(e.subject, 'llama');
    assert.equal(e.data.tenant, null);
    assert.equal(e.data.prompt_tokens, null);
    assert.equal(e.data.completion_tokens, null);
    assert.equal(e.data.billing_basis, 'none');
  });

  it('says what its figures mean: engine usage, tokens delivered by a cut stream, or none', () => {
    assert.equal(ledgerUsageSource('upstream', 3), 'engine');
    assert.equal(ledgerUsageSource('events', 3), 'events');
    assert.equal(ledgerUsageSource('fallback', 0), 'fallback');
    // A source this version does not know keeps no figure it cannot explain.
    assert.equal(ledgerUsageSource('something-new', 3), 'events');
    assert.equal(ledgerUsageSource('something-new', 0), 'none');
    assert.equal(billingBasis('engine', 5), 'engine');
    assert.equal(billingBasis('events', 5), 'delivered');
    assert.equal(billingBasis('fallback', 0), 'none');
    assert.equal(billingBasis('none', undefined), 'none');
  });

  it("numbers a writer's records 1, 2, 3... under one start id, and each event id is the one given", () => {
    const lines: string[] = [];
    const writer = createUsageWriter('infermeter://h:1', (l) => lines.push(l));
    writer.record(SAMPLE, 'same-client-id', 'own-1');
    writer.record(SAMPLE, 'same-client-id', 'own-2');
    const events = lines.map((l) => {
      assert.ok(l.endsWith('\n') && !l.slice(0, -1).includes('\n'), 'one line each');
      return JSON.parse(l) as UsageEvent;
    });
    assert.deepEqual(
      events.map((e) => e.data.seq),
      [1, 2],
    );
    assert.equal(events[0]!.data.process_start_id, events[1]!.data.process_start_id);
    assert.deepEqual(
      events.map((e) => e.id),
      ['own-1', 'own-2'],
      "a client's repeated X-Request-Id is not the event id",
    );
    const other = createUsageWriter('infermeter://h:1', (l) => lines.push(l));
    other.record(SAMPLE, 'x', 'own-3');
    assert.notEqual((JSON.parse(lines[2]!) as UsageEvent).data.process_start_id, events[0]!.data.process_start_id, 'a new start, a new id');
  });
});

describe('usage records: configuration', () => {
  it("names the instance by host and data port by default, a URI's authority", () => {
    assert.equal(defaultSource('Node_1.example', 1025), 'infermeter://node-1.example:1025');
    assert.equal(defaultSource('', 1025), 'infermeter://localhost:1025');
  });

  it('stops the start on a directory it cannot write to, or a source that is not a URI reference, naming the variable', () => {
    const env = { INFERMETER_UPSTREAM: 'http://127.0.0.1:8000', INFERMETER_USAGE_DIR: '/dev/null/usage', INFERMETER_USAGE_SOURCE: 'has space' };
    assert.throws(
      () => loadConfig(env),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.problems.some((p) => p.variable === 'INFERMETER_USAGE_DIR') &&
        e.problems.some((p) => p.variable === 'INFERMETER_USAGE_SOURCE'),
    );
    assert.equal(loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:8000' }).usage, undefined, 'off when unset');
  });
});
