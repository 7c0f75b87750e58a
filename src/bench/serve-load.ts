/**
 * The load generator of `kvtier bench serve`: autocannon against the
 * server's completions. The bench runs it in a child process
 * (serve-load-main.ts), so its CPU time and heap are not the server's.
 * autocannon is a development dependency, loaded only here.
 */

export interface ServeLoadSpec {
  readonly url: string;
  /** Request bodies, sent in turn (request i gets bodies[i % length]). */
  readonly bodies: readonly string[];
  readonly connections: number;
  /** Either a fixed rate for a bounded time, or a fixed number of requests at once. */
  readonly overallRate?: number;
  readonly durationSeconds?: number;
  readonly amount?: number;
  readonly timeoutSeconds: number;
}

export interface ServeLoadResult {
  readonly requests: number;
  readonly ok: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly seconds: number;
  readonly statusCodes: Readonly<Record<string, number>>;
}

export async function runLoad(spec: ServeLoadSpec): Promise<ServeLoadResult> {
  let autocannon: typeof import('autocannon').default;
  try {
    autocannon = (await import('autocannon')).default;
  } catch (error) {
    throw new Error(`bench serve needs the autocannon package (a development dependency of kvtier: run npm install in the kvtier folder): ${(error as Error).message}`);
  }
  let next = 0;
  const result = await autocannon({
    url: `${spec.url}/v1/completions`,
    connections: spec.connections,
    ...(spec.overallRate !== undefined ? { overallRate: spec.overallRate } : {}),
    ...(spec.durationSeconds !== undefined ? { duration: spec.durationSeconds } : {}),
    ...(spec.amount !== undefined ? { amount: spec.amount } : {}),
    timeout: spec.timeoutSeconds,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    requests: [{ setupRequest: (request) => ({ ...request, body: spec.bodies[next++ % spec.bodies.length] }) }],
  });
  const statusCodes: Record<string, number> = {};
  for (const [code, stats] of Object.entries(result.statusCodeStats)) statusCodes[code] = stats.count;
  return {
    requests: result.requests.total,
    ok: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    seconds: result.duration,
    statusCodes,
  };
}
