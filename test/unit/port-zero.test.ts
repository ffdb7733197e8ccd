// Every test listens on port 0, so that `npm test` passes beside a running `npm run demo` (or
// any infermeter on its default ports 1025, 1026 and 1027), and beside itself. Checked on the
// test sources (docs/testing.md#what-a-new-test-must-not-do):
// - no `listen(<port>)` or `listen({ port: <port> })` with a port other than 0;
// - in a file that starts infermeter (in process or as a child), an environment written out
//   whole (no `...spread` of a shared one such as the harness's) that sets one of its three
//   ports to 0 gives all three: the one left out is its default, taken by whatever runs beside.
import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseSync, Visitor, type Expression, type ObjectExpression, type ObjectProperty } from 'oxc-parser';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const PORTS = ['INFERMETER_PORT', 'INFERMETER_MANAGEMENT_PORT', 'INFERMETER_METRICS_PORT'];
/** What starts infermeter in a test file: in process, or the CLI, the package or the demo in a child. */
const STARTS = /\bstartInfermeter\(|\bstartPrimary\(|\bspawn(Node)?\(|\brun\(t,/;

function testSources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testSources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

type Member = ObjectExpression['properties'][number];
const propertyName = (p: Member): string | undefined =>
  p.type === 'Property' && !p.computed ? (p.key.type === 'Identifier' ? p.key.name : p.key.type === 'Literal' ? String(p.key.value) : undefined) : undefined;

/** Where a source binds a fixed port or leaves one of infermeter's ports at its default. */
function fixedPorts(path: string, text: string): string[] {
  const { program } = parseSync(path, text, { lang: 'ts' });
  const starts = STARTS.test(text);
  const found: string[] = [];
  const at = (offset: number) => `${relative(ROOT, path)}:${text.slice(0, offset).split('\n').length}`;
  const fixed = (node: Expression | undefined) => node?.type === 'Literal' && typeof node.value === 'number' && node.value !== 0;
  new Visitor({
    CallExpression(node) {
      const callee = node.callee;
      if (callee.type !== 'MemberExpression' || callee.computed || callee.property.type !== 'Identifier' || callee.property.name !== 'listen') return;
      const first = node.arguments[0];
      const port =
        first?.type === 'ObjectExpression'
          ? first.properties.find((p): p is ObjectProperty => p.type === 'Property' && propertyName(p) === 'port')?.value
          : first?.type === 'SpreadElement'
            ? undefined
            : first;
      if (fixed(port as Expression | undefined)) found.push(`${at(node.start)}: listens on port ${text.slice(port!.start, port!.end)}`);
    },
    ObjectExpression(node) {
      if (!starts || node.properties.some((p) => p.type === 'SpreadElement')) return;
      const names = new Set(node.properties.map(propertyName));
      const given = PORTS.filter((p) => names.has(p));
      const zero = node.properties.some(
        (p) => p.type === 'Property' && PORTS.includes(propertyName(p) ?? '') && p.value.type === 'Literal' && p.value.value === '0',
      );
      if (zero && given.length < PORTS.length) {
        found.push(`${at(node.start)}: gives ${given.join(', ')} but not ${PORTS.filter((p) => !names.has(p)).join(', ')} (its default is taken)`);
      }
    },
  }).visit(program);
  return found;
}

describe('tests listen on port 0', () => {
  it('no test binds a fixed port, nor starts infermeter with one of its ports left at its default', () => {
    const found = testSources(join(ROOT, 'test')).flatMap((path) => fixedPorts(path, readFileSync(path, 'utf8')));
    assert.deepEqual(found, []);
  });

  it('the check finds each way of doing it (and not port 0, nor a config never started)', () => {
    const check = (text: string) => fixedPorts(join(ROOT, 'test/x.test.ts'), text).length;
    assert.equal(check('server.listen(1027);'), 1);
    assert.equal(check("server.listen({ port: 8080, host: '127.0.0.1' });"), 1);
    assert.equal(check("server.listen(0, '127.0.0.1');"), 0);
    assert.equal(check('server.listen({ port: 0 });'), 0);
    // the buffer-pool test's start, before: the metrics port left at 1027
    const start = (env: string) => `await startInfermeter(loadConfig(${env}), { log });`;
    assert.equal(check(start("{ INFERMETER_UPSTREAM: u, INFERMETER_PORT: '0', INFERMETER_MANAGEMENT_PORT: '0' }")), 1);
    assert.equal(check(start("{ INFERMETER_UPSTREAM: u, INFERMETER_PORT: '0', INFERMETER_MANAGEMENT_PORT: '0', INFERMETER_METRICS_PORT: '0' }")), 0);
    assert.equal(check(start('{ ...TEST_ENV, INFERMETER_METRICS_PORT: p }')), 0);
    assert.equal(check("loadConfig({ INFERMETER_PORT: '0', INFERMETER_METRICS_PORT: '0' });"), 0);
    // a bad value the start refuses, a port given to a client (the healthcheck probe)
    assert.equal(check("run(t, CLI, { INFERMETER_PORT: 'eighty' });"), 0);
    assert.equal(check('await probe(t, { INFERMETER_MANAGEMENT_PORT: String(port) });'), 0);
  });
});
