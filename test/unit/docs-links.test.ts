// The README and docs/ as a reader follows them: every relative link leads to a file of the
// repository, and every #anchor to a heading of its target, by GitHub's rules for a heading's
// id (lower case; characters other than letters, digits, spaces, `-` and `_` dropped; spaces as
// `-`; a repeated heading suffixed -1, -2, ...). Links inside code are not links.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DOCUMENTS = [
  'README.md',
  'bench/README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The text a reader sees outside code: fenced blocks blanked (lines kept), inline code spans emptied. */
export function prose(markdown: string): string {
  let fence: string | undefined;
  return markdown
    .split('\n')
    .map((line) => {
      const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
      if (fence !== undefined) {
        if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = undefined;
        return '';
      }
      if (marker !== undefined) {
        fence = marker;
        return '';
      }
      return line.replace(/(`+)(?:(?!\1).)+?\1/g, '``');
    })
    .join('\n');
}

/** GitHub's id of a heading: its rendered text (code, emphasis and link markup gone) slugged. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/[`*]/g, '')
    .replace(/(^|\s)_+|_+(\s|$)/g, '$1$2');
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a document offers: its headings' ids (duplicates numbered) and explicit `<a id>`/`<a name>`. */
export function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  let fence: string | undefined;
  for (const line of markdown.split('\n')) {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence !== undefined) {
      if (marker !== undefined && marker[0] === fence[0] && line.trim() === marker) fence = undefined;
      continue;
    }
    if (marker !== undefined) {
      fence = marker;
      continue;
    }
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading !== undefined) {
      const base = slug(heading);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      found.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const [, id] of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) found.add(id!);
  }
  return found;
}

/** The inline links and images of a document's prose: target and line. */
export function links(markdown: string): Array<{ target: string; line: number }> {
  const found: Array<{ target: string; line: number }> = [];
  prose(markdown)
    .split('\n')
    .forEach((text, i) => {
      for (const [, target] of text.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) found.push({ target: target!, line: i + 1 });
    });
  return found;
}

/** What is wrong with one relative link of `from` (a path from the root), or undefined. */
function broken(from: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // https:, mailto: ...: not relative
  const hash = target.indexOf('#');
  const path = hash === -1 ? target : target.slice(0, hash);
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const file = path === '' ? join(ROOT, from) : resolve(ROOT, dirname(from), decodeURIComponent(path));
  if (!file.startsWith(ROOT + '/') && file !== ROOT) return `${target} leaves the repository`;
  if (!existsSync(file)) return `${relative(ROOT, file)} does not exist`;
  if (anchor === undefined) return undefined;
  if (!file.endsWith('.md')) return /^L\d+(-L\d+)?$/.test(anchor) ? undefined : `#${anchor} on a file that is not markdown`;
  return anchors(readFileSync(file, 'utf8')).has(anchor) ? undefined : `no heading #${anchor} in ${relative(ROOT, file)}`;
}

describe('links in the README and docs/', () => {
  it('slugs headings as GitHub does, and reads links outside code only', () => {
    assert.equal(slug("vLLM's dashboards: what works without the engine's metrics"), 'vllms-dashboards-what-works-without-the-engines-metrics');
    assert.equal(slug('Live dashboard (`GET /dashboard`)'), 'live-dashboard-get-dashboard');
    assert.equal(slug('Per-request log (`INFERMETER_ACCESS_LOG`)'), 'per-request-log-infermeter_access_log');
    assert.equal(slug('**Bold** and [a link](x.md)'), 'bold-and-a-link');
    assert.equal(slug('Issue 34: the default path (in progress)'), 'issue-34-the-default-path-in-progress');
    assert.deepEqual([...anchors('# A\n## A\n```\n# not a heading\n```\n## A\n<a id="x"></a>')], ['a', 'a-1', 'a-2', 'x']);
    assert.deepEqual(links('[a](a.md) `[b](b.md)`\n```\n[c](c.md)\n```\n![d](d.png "title")'), [
      { target: 'a.md', line: 1 },
      { target: 'd.png', line: 5 },
    ]);
    assert.equal(broken('README.md', 'docs/nowhere.md'), 'docs/nowhere.md does not exist');
    assert.equal(broken('README.md', 'docs/metrics.md#no-such-heading'), 'no heading #no-such-heading in docs/metrics.md');
    assert.equal(broken('docs/metrics.md', '#goodput'), undefined);
  });

  for (const document of DOCUMENTS) {
    it(`${document}: every relative link resolves`, () => {
      const text = readFileSync(join(ROOT, document), 'utf8');
      const problems = links(text).flatMap(({ target, line }) => {
        const problem = broken(document, target);
        return problem === undefined ? [] : [`${document}:${line}: (${target}) ${problem}`];
      });
      assert.deepEqual(problems, []);
    });
  }
});
