// Words of the data plane written again where a lower folder needs them, so that imports between
// src/ folders run one way (test/unit/architecture.test.ts): the label values of infermeter's own
// proxy families (metrics/own/proxy-families.ts), held equal at compile time (tsc --noEmit reads
// the tests), and the upstream connection policies INFERMETER_UPSTREAM_CONNECTIONS takes
// (config/variables/security-and-limits.ts). Neither side can gain a word alone.
import { strict as assert } from 'node:assert';
import { it } from 'node:test';
import { UPSTREAM_CONNECTION_POLICIES as CONFIG_POLICIES } from '../../src/config/variables/security-and-limits.ts';
import type { HeldBodyUse as PlaneHeldBodyUse } from '../../src/data-plane/body-budget.ts';
import type { ClientErrorKind as PlaneClientErrorKind } from '../../src/data-plane/client-connections.ts';
import type { ResendReason as PlaneResendReason } from '../../src/data-plane/lifecycle.ts';
import type { ProxyErrorKind as PlaneProxyErrorKind } from '../../src/data-plane/openai-error.ts';
import { UPSTREAM_CONNECTION_POLICIES } from '../../src/data-plane/upstream-connections.ts';
import type { InjectedBody as PlaneInjectedBody } from '../../src/data-plane/usage-injection.ts';
import type { ClientErrorKind, HeldBodyUse, InjectedBody, ProxyErrorKind, ResendReason } from '../../src/metrics/own/proxy-families.ts';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

it("the proxy families count the data plane's words, no more and no fewer", () => {
  const same: [
    Same<ProxyErrorKind, PlaneProxyErrorKind>,
    Same<ClientErrorKind, PlaneClientErrorKind>,
    Same<ResendReason, PlaneResendReason>,
    Same<HeldBodyUse, PlaneHeldBodyUse>,
    Same<InjectedBody, PlaneInjectedBody>,
  ] = [true, true, true, true, true];
  assert.deepEqual(same, [true, true, true, true, true]);
});

it("INFERMETER_UPSTREAM_CONNECTIONS takes the data plane's policies, in its order", () => {
  assert.deepEqual([...CONFIG_POLICIES], [...UPSTREAM_CONNECTION_POLICIES]);
});
