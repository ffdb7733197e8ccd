// The Dockerfile's final stage as the tests read it: its instructions, its ENV and its
// HEALTHCHECK command, so that tests run infermeter and its probe as the image would.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

export const DOCKERFILE = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');

export interface Instruction {
  readonly op: string;
  readonly rest: string;
}

/** Instructions of the final stage (after the last FROM), continuation lines joined. */
export function finalStage(text = DOCKERFILE): Instruction[] {
  const lines = text.split('\n').filter((l) => !/^\s*#/.test(l));
  const joined = lines.join('\n').replace(/\\\n/g, ' ');
  const instructions = joined
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .map((l) => {
      const m = /^(\w+)\s+(.*)$/.exec(l);
      assert.ok(m, `Dockerfile instruction: ${l}`);
      return { op: m[1]!.toUpperCase(), rest: m[2]! };
    });
  const from = instructions.map((i) => i.op).lastIndexOf('FROM');
  assert.ok(from >= 0, 'the Dockerfile has a FROM');
  return instructions.slice(from + 1);
}

/** The stage's ENV, `KEY=value` pairs (quotes removed) or the old `KEY value` form. */
export function imageEnv(stage: readonly Instruction[] = finalStage()): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { rest } of stage.filter((i) => i.op === 'ENV')) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*=/.test(rest)) {
      const m = /^(\S+)\s+(.*)$/.exec(rest);
      assert.ok(m, `ENV ${rest}`);
      env[m[1]!] = m[2]!;
      continue;
    }
    for (const pair of rest.match(/[A-Za-z_][A-Za-z0-9_]*=(?:"[^"]*"|'[^']*'|\S*)/g) ?? []) {
      const eq = pair.indexOf('=');
      env[pair.slice(0, eq)] = pair.slice(eq + 1).replace(/^(["'])(.*)\1$/, '$2');
    }
  }
  return env;
}

/** The exec-form command of an instruction such as `HEALTHCHECK ... CMD [...]` or `ENTRYPOINT [...]`. */
export function execForm(stage: readonly Instruction[], op: string): string[] {
  const instruction = stage.find((i) => i.op === op);
  assert.ok(instruction, `the final stage has a ${op}`);
  const json = /(\[.*\])\s*$/.exec(instruction.rest)?.[1];
  assert.ok(json !== undefined, `${op} is in exec form: ${instruction.rest}`);
  return JSON.parse(json) as string[];
}

/** An image path under /app (WORKDIR) mapped to the source Node runs directly: dist/x.js -> src/x.ts. */
export function sourceOf(imagePath: string): URL {
  const m = /^dist\/(.+)\.js$/.exec(imagePath);
  assert.ok(m, `${imagePath} is a built module under dist/`);
  return new URL(`../../src/${m[1]}.ts`, import.meta.url);
}
