// Liveness and readiness on the management port: /health answers while the process serves,
// /ready only while the data plane accepts traffic (a load balancer stops sending at 503).
import { Hono } from 'hono';

export interface ManagementOptions {
  readonly ready: () => boolean;
}

export function createManagementApp(options: ManagementOptions): Hono {
  const app = new Hono();
  app.get('/health', (c) => c.json({ status: 'healthy' }));
  app.get('/ready', (c) => (options.ready() ? c.json({ status: 'ready' }) : c.json({ status: 'not ready' }, 503)));
  return app;
}
