import { EngineError } from '../core/errors.js';
import type { ExternalMatch, IssuedLoad } from './connector-port.js';
import type { Request } from './request.js';

/**
 * Checks of what a connector hands the scheduler. A violation is a bug in
 * the connector, reported before it can corrupt the block tables.
 */

export function checkExternalMatch(request: Request, numLocal: number, match: ExternalMatch): void {
  const max = request.numTokens - numLocal;
  if (!Number.isInteger(match.numTokens) || match.numTokens < 0 || match.numTokens > max) {
    throw new EngineError(
      `connector matched ${match.numTokens} tokens for request '${request.id}' beyond its ${numLocal} ` +
        `GPU-cached tokens; expected an integer in [0, ${max}]`,
    );
  }
}

/** The load must write a run of the request's own table: `table` is its block ids. */
export function checkIssuedLoad(
  request: Request,
  numExternal: number,
  load: IssuedLoad | null,
  table: readonly number[],
): asserts load is IssuedLoad {
  if (load === null) {
    throw new EngineError(`connector matched ${numExternal} tokens for request '${request.id}' but issued no load`);
  }
  const n = load.gpuBlockIds.length;
  const first = load.firstBlockIndex;
  const ok =
    Number.isInteger(first) &&
    first >= 0 &&
    first + n <= table.length &&
    load.blockHashes.length === n &&
    load.gpuBlockIds.every((id, k) => table[first + k] === id);
  if (!ok) {
    throw new EngineError(
      `connector load job ${load.jobId} for request '${request.id}' does not match its block table ` +
        `(firstBlockIndex ${first}, ${n} blocks, table of ${table.length})`,
    );
  }
}
