// The process's budget for request bodies held in memory (INFERMETER_MAX_HELD_BODY_BYTES): a
// chat body held whole for usage injection, a streamed body's copy kept for a re-send, a
// chunked DELETE or OPTIONS held to give it a length. Each is capped per request by
// INFERMETER_MAX_INSPECT_BYTES; this caps their total over every connection, so that clients
// that send most of a big body and stall cannot grow the heap without bound, and each client
// address's part of it (INFERMETER_MAX_HELD_BODY_BYTES_PER_CLIENT), so that one client cannot
// take it all. Bytes are taken as they arrive and given back when the request that held them
// no longer needs them (its answer began, or it ended). A request that finds no room may wait
// for some (wait), told when bytes are given back.

/** What holding a body is for: the label of infermeter_request_bodies_unheld_total. */
export type HeldBodyUse = 'usage_injection' | 'retry_copy' | 'content_length';

export interface BodyBudget {
  /** One request's share, for its client's address (the connection's peer): taken chunk by chunk, given back at once. */
  hold(client?: string): BodyHold;
  /** Bytes held now, over every request. */
  held(): number;
}

export interface BodyHold {
  /** Takes `bytes` more for this request; false (nothing taken) when the budget, or its client's part of it, has not that much left. */
  take(bytes: number): boolean;
  /** Gives back all this request has taken (again: nothing more). */
  release(): void;
  /** Calls `room` once `bytes` more could be taken (it takes them): after some were given back. Returns what cancels the wait. */
  wait(bytes: number, room: () => void): () => void;
  /** Whether `bytes` in all could ever be held for this request (nothing else held): waiting for room makes sense. */
  fits(bytes: number): boolean;
}

/** `perClient`: the most one client address may hold (the whole budget when larger). */
export function createBodyBudget(maxBytes: number, perClient = maxBytes): BodyBudget {
  let held = 0;
  const byClient = new Map<string, number>();
  const waiting = new Set<() => void>();
  const givenBack = (): void => {
    for (const retry of [...waiting]) retry();
  };
  return {
    held: () => held,
    hold(client = '') {
      let taken = 0;
      const hold: BodyHold = {
        take(bytes) {
          const mine = byClient.get(client) ?? 0;
          if (held + bytes > maxBytes || mine + bytes > perClient) return false;
          held += bytes;
          taken += bytes;
          byClient.set(client, mine + bytes);
          return true;
        },
        release() {
          if (taken === 0) return;
          held -= taken;
          const left = (byClient.get(client) ?? 0) - taken;
          if (left > 0) byClient.set(client, left);
          else byClient.delete(client);
          taken = 0;
          givenBack();
        },
        fits: (bytes) => bytes <= maxBytes && bytes <= perClient,
        wait(bytes, room) {
          const retry = (): void => {
            if (!hold.take(bytes)) return;
            waiting.delete(retry);
            room();
          };
          waiting.add(retry);
          return () => waiting.delete(retry);
        },
      };
      return hold;
    },
  };
}
