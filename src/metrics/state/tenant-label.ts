// The tenant label of a request's events: the reserved values, and the rule that gives a tenant
// a place of its own only once the engine accepted one of its requests.
import type { LabelGuard } from '../exposition/label-guard.ts';

/** Reserved tenant values: no tenant, and the fold of tenants past the cap. */
export const NO_TENANT = 'none';
export const OTHER_TENANT = 'other';
/**
 * The tenant of requests the engine did not accept (401 or 403), and of those of a tenant
 * without a place that ended without a 2xx answer: a tenant's place is only ever given to one
 * whose request the engine accepted, so refused keys cannot take the real tenants' places.
 */
export const UNAUTHENTICATED_TENANT = 'unauthenticated';

/**
 * A tenant's label for an event: `unauthenticated` when the engine refused the request (401,
 * 403); the tenant's own when it has a place; a place given (or `other` past the cap, counted
 * once per request with `count`) when the engine accepted the request (2xx); else (no answer,
 * or another status) `unauthenticated`.
 */
export function tenantLabel(guard: LabelGuard, tenant: string, accepted: boolean | undefined, count = false): string {
  if (accepted === false) return UNAUTHENTICATED_TENANT;
  const kept = guard.kept(tenant);
  if (kept !== undefined) return kept;
  return accepted === true ? guard.model(tenant, count) : UNAUTHENTICATED_TENANT;
}
