// The /metrics exposition in pieces (Metrics.renderPieces): every family of the registry in
// order, our own families' text as they write it, the client's as it formats it, OpenMetrics
// converted on the way, the engine's relayed families last; the event loop given back between
// pieces, so that a scrape of thousands of series never holds the data plane's streams for long.
import type { Registry } from '@prometheus-io/client';
import type { EngineScraper } from '../../engine/engine-scraper.ts';
import type { Family } from './families.ts';
import { OPENMETRICS_EOF, openMetricsParts, toOpenMetrics } from './openmetrics.ts';

/**
 * How long one piece of a /metrics render may hold the event loop (ms): the series (or the few
 * kilobytes of a derived family) started within it is finished, then the loop is given back.
 */
const RENDER_SLICE_MS = 2;
/** And how large a piece may grow (its encoding, by the caller, is work of the same slice). */
const RENDER_PIECE_CHARS = 32 * 1024;

/** Resolves in the check phase of this turn of the event loop, after its I/O. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * `scraper`: the engine scraper, whose relayed families follow ours; `engineFirst`: our families
 * left out when the relay carries the engine's own of that name.
 */
export function createRenderPieces(
  registry: Registry,
  scraper: () => EngineScraper | undefined,
  engineFirst: ReadonlySet<string>,
): (openMetrics?: boolean) => AsyncGenerator<string> {
  // The relayed families in OpenMetrics, converted once per relay text (one per engine scrape).
  let relayOm: { text: string; om: string } | undefined;
  const relayOpenMetrics = (text: string): string => {
    if (relayOm?.text !== text) relayOm = { text, om: toOpenMetrics(text, true) };
    return relayOm.om;
  };
  async function* renderPieces(openMetrics = false): AsyncGenerator<string> {
    // Our families write their own text (label strings built once per series); the client
    // formats its own metric types.
    let piece = '';
    let sliceStart = performance.now();
    const relayed = scraper()?.relayedFamilies();
    for (const metric of registry.getMetricsAsArray()) {
      if (relayed !== undefined && engineFirst.has(metric.name) && relayed.has(metric.name)) continue;
      const family = metric as unknown as Partial<Family>;
      let parts: Iterable<string>;
      if (family.renderParts !== undefined) {
        const own = family.renderParts(openMetrics);
        if (openMetrics) {
          const convert = openMetricsParts();
          parts = (function* () {
            for (const part of own) yield convert(part);
          })();
        } else parts = own;
      } else {
        const text = family.renderText !== undefined ? family.renderText(openMetrics) : `${await registry.getSingleMetricAsString(metric.name)}\n`;
        parts = [openMetrics ? toOpenMetrics(text) : text];
      }
      for (const part of parts) {
        piece += part;
        if (piece.length < RENDER_PIECE_CHARS && performance.now() - sliceStart < RENDER_SLICE_MS) continue;
        // Empty when a family worked long between two of its lines (chargeback.ts's sums): the
        // loop is given back all the same; readers skip it.
        yield piece;
        piece = '';
        // The loop's other work (the streams' reads and writes) runs before the next slice.
        await nextTurn();
        sliceStart = performance.now();
      }
    }
    if (!openMetrics) {
      yield piece + (scraper()?.relayText() ?? '');
      return;
    }
    const relay = scraper()?.relayText();
    yield piece + (relay === undefined || relay === '' ? '' : relayOpenMetrics(relay)) + OPENMETRICS_EOF;
  }
  return renderPieces;
}
