// What infermeter itself counted as going wrong, read from its /metrics: with the load client's
// own classification (load.ts), a failure in a run is told apart as the client's, the
// proxy's or the upstream's.
const FAILURE_SERIES =
  /^(infermeter_(upstream_errors|stream_tap_problems|client_errors|request_body_uninspected|requests_rejected|worker_lost_requests)_total|request_failed_total|request_cancelled_total)\b/;

/** Every failure series of infermeter's exposition, by its name and labels. */
export async function failureCounters(metricsUrl: string): Promise<Map<string, number>> {
  const text = await (await fetch(new URL('/metrics', metricsUrl))).text();
  const counters = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!FAILURE_SERIES.test(line)) continue;
    const space = line.lastIndexOf(' ');
    counters.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return counters;
}

/** The series that rose from `before` to `after`, with by how much. */
export function counted(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>): string[] {
  const rose: string[] = [];
  for (const [series, value] of after) {
    const delta = value - (before.get(series) ?? 0);
    if (delta > 0) rose.push(`${series} +${delta}`);
  }
  return rose;
}
