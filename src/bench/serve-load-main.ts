import { createInterface } from 'node:readline';
import { runLoad, type ServeLoadSpec } from './serve-load.js';

/**
 * Child-process entry of the serve bench's load generator. On stdin: a
 * ServeLoadSpec as one line of JSON, then (after this prints `ready`) a
 * line `go`; on stdout: `ready`, then the ServeLoadResult as JSON. The
 * handshake lets the parent start its CPU accounting once this process
 * has started and read its spec, so neither counts as serving.
 */
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

async function main(): Promise<void> {
  const spec = await lines.next();
  if (spec.done === true) throw new Error('no load spec on stdin');
  process.stdout.write('ready\n');
  const go = await lines.next();
  if (go.done === true || go.value.trim() !== 'go') throw new Error('expected "go" on stdin after the spec');
  const result = await runLoad(JSON.parse(spec.value) as ServeLoadSpec);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(1);
  },
);
