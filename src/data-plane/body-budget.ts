// The process's budget for request bodies held in memory (INFERMETER_MAX_HELD_BODY_BYTES): a
// chat body held whole for usage injection, a streamed body's copy kept for a re-send, a
// chunked DELETE or OPTIONS held to give it a length. Each is capped per request by
// INFERMETER_MAX_INSPECT_BYTES; this caps their total over every connection, so that clients
// that send most of a big body and stall cannot grow the heap without bound. Bytes are taken
// as they arrive and given back when the request that held them ends.

/** What holding a body is for: the label of infermeter_request_bodies_unheld_total. */
export type HeldBodyUse = 'usage_injection' | 'retry_copy' | 'content_length';

export interface BodyBudget {
  /** One request's share: taken chunk by chunk, given back at once. */
  hold(): BodyHold;
  /** Bytes held now, over every request. */
  held(): number;
}

export interface BodyHold {
  /** Takes `bytes` more for this request; false (nothing taken) when the budget has not that much left. */
  take(bytes: number): boolean;
  /** Gives back all this request has taken (again: nothing more). */
  release(): void;
}

export function createBodyBudget(maxBytes: number): BodyBudget {
  let held = 0;
  return {
    held: () => held,
    hold() {
      let taken = 0;
      return {
        take(bytes) {
          if (held + bytes > maxBytes) return false;
          held += bytes;
          taken += bytes;
          return true;
        },
        release() {
          held -= taken;
          taken = 0;
        },
      };
    },
  };
}
