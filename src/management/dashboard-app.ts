// GET /dashboard on the management port: one self-contained page (its HTML, scripts and style
// sheet beside this module in dashboard/, uPlot's from node_modules/uplot/dist, all read once at
// start) and GET /dashboard/data, the JSON the page polls (dashboard-feed.ts). No asset comes
// from another origin; the page's Content-Security-Policy allows only its own.
//
// With a metrics token, the page and its assets are served without it (they hold no data: the
// page asks for the token, keeps it in the tab's sessionStorage and sends it as an Authorization
// header), and /dashboard/data wants it like /metrics-json does. A token in the URL is not
// accepted: it would end up in access logs and browser history.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { Hono } from 'hono';
import type { DashboardFeed } from './dashboard-feed.ts';

interface Asset {
  readonly body: Buffer;
  readonly type: string;
}

export interface DashboardAssets {
  /** The page; undefined with the reason when an asset could not be read (a build without them). */
  readonly html: { readonly body: string; readonly etag: string } | undefined;
  readonly problem: string | undefined;
  /** By their hashed names under /dashboard/assets/. */
  readonly files: ReadonlyMap<string, Asset>;
}

const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';
const IMMUTABLE = 'public, max-age=31536000, immutable';
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Paths served without the token: the page and its static assets, which hold no data. */
export function isDashboardShell(path: string): boolean {
  return path === '/dashboard' || path === '/dashboard/' || path.startsWith('/dashboard/assets/');
}

const hash = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex').slice(0, 12);

let read: Map<string, Buffer> | undefined;

/** The files, read once per process: ours beside this module (copied into dist/ by the build), uPlot's from its package. */
function readFiles(): Map<string, Buffer> {
  if (read !== undefined) return read;
  const require = createRequire(import.meta.url);
  const files = new Map<string, Buffer>();
  for (const name of ['index.html', 'dashboard.js', 'dashboard-charts.js', 'dashboard.css'])
    files.set(name, readFileSync(fileURLToPath(new URL(`./dashboard/${name}`, import.meta.url))));
  for (const name of ['uPlot.iife.min.js', 'uPlot.min.css']) files.set(name, readFileSync(require.resolve(`uplot/dist/${name}`)));
  read = files;
  return files;
}

/** The page and its assets; `tokenRequired` tells the page to ask for the token first. */
export function loadDashboardAssets(tokenRequired: boolean): DashboardAssets {
  const files = new Map<string, Asset>();
  try {
    const all = readFiles();
    const own = (name: string): Buffer => all.get(name)!;
    const uplot = own;
    const add = (name: string, body: Buffer, type: string): string => {
      const dot = name.lastIndexOf('.');
      const hashed = `${name.slice(0, dot)}.${hash(body)}${name.slice(dot)}`;
      files.set(hashed, { body, type });
      return `dashboard/assets/${hashed}`;
    };
    const urls: Record<string, string> = {
      UPLOT_JS: add('uPlot.iife.min.js', uplot('uPlot.iife.min.js'), JS),
      UPLOT_CSS: add('uPlot.min.css', uplot('uPlot.min.css'), CSS),
      CHARTS_JS: add('dashboard-charts.js', own('dashboard-charts.js'), JS),
      APP_JS: add('dashboard.js', own('dashboard.js'), JS),
      APP_CSS: add('dashboard.css', own('dashboard.css'), CSS),
      AUTH: tokenRequired ? 'bearer' : 'none',
    };
    const body = own('index.html')
      .toString('utf8')
      .replace(/\{\{(\w+)\}\}/g, (whole, key: string) => urls[key] ?? whole);
    return { html: { body, etag: `"${hash(body)}"` }, problem: undefined, files };
  } catch (error) {
    return { html: undefined, problem: `the dashboard's files could not be read: ${(error as Error).message}`, files };
  }
}

export interface DashboardRouteOptions {
  readonly feed: DashboardFeed;
  readonly assets: DashboardAssets;
}

export function registerDashboard(app: Hono, { feed, assets }: DashboardRouteOptions): void {
  app.get('/dashboard', (c) => {
    if (assets.html === undefined) return c.text(`${assets.problem}\n`, 503);
    const headers = {
      'content-type': 'text/html; charset=utf-8',
      // Revalidated on every load (a new version's page names new asset files).
      'cache-control': 'no-cache',
      etag: assets.html.etag,
      'content-security-policy': CSP,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'x-frame-options': 'DENY',
    };
    if (c.req.header('if-none-match') === assets.html.etag) return c.body(null, 304, headers);
    return c.body(assets.html.body, 200, headers);
  });
  // Relative URLs in the page resolve from /dashboard: send /dashboard/ there.
  app.get('/dashboard/', (c) => c.body(null, 308, { location: '../dashboard' }));
  app.get('/dashboard/assets/:name', (c) => {
    const asset = assets.files.get(c.req.param('name'));
    if (asset === undefined) return c.text('not found\n', 404);
    return c.body(new Uint8Array(asset.body), 200, { 'content-type': asset.type, 'cache-control': IMMUTABLE, 'x-content-type-options': 'nosniff' });
  });
  app.get('/dashboard/data', (c) => {
    feed.watched();
    const raw = c.req.query('since');
    const since = raw !== undefined && /^\d{1,15}$/.test(raw) ? Number(raw) : undefined;
    return c.body(JSON.stringify(feed.data(since)), 200, {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    });
  });
}
