// The three parts of undici the data plane uses (upstream-connections.ts), loaded from their own
// files: undici's index loads 109 modules (fetch, websockets, mocks, caches, interceptors, proxy
// agents) where these need 21: 40 to 50 ms of CPU less on every start of infermeter and of each
// of its workers with Node's compile cache filled, 70 to 95 ms without. undici has no exports
// map, so the files are reachable; test/unit/undici-parts.test.ts checks that each is the very
// object the index exports, so an undici that moves one fails there, not in production. Typed by
// undici's own declarations. The index also adds `request`, `stream` and the other API methods
// to Dispatcher's prototype: the data plane calls `dispatch` only.
import { createRequire } from 'node:module';
import type * as Undici from 'undici';

const require = createRequire(import.meta.url);

export const Client = require('undici/lib/dispatcher/client.js') as typeof Undici.Client;
export const Pool = require('undici/lib/dispatcher/pool.js') as typeof Undici.Pool;
export const buildConnector = require('undici/lib/core/connect.js') as typeof Undici.buildConnector;
