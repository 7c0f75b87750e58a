import type { TraceRecord } from '../workload/trace.js';

/**
 * A trace seen as the engine's offloading sees it: each request's prompt cut
 * into full offloaded blocks of `blockTokens` tokens (blockSize x
 * offloadFactor), each block named by everything before and in it, the way
 * chained block hashes name it. Blocks get dense integer ids so simulations
 * can use typed arrays.
 *
 * A block's identity is the chain of hash ids up to the trace block holding
 * its last token plus where in that trace block it ends. Equal hash id chains
 * are equal tokens (trace-tokens.ts), so equal identities are exactly the
 * blocks the engine's hashes would find equal.
 */
export interface OffloadBlockAccesses {
  /** Tokens per offloaded block. */
  readonly blockTokens: number;
  /** Block ids of every request's full prompt blocks, request after request. */
  readonly blocks: Int32Array;
  /** Request i's blocks are blocks[starts[i] .. starts[i + 1]). */
  readonly starts: Int32Array;
  /** Request i's prompt length in tokens. */
  readonly promptTokens: Int32Array;
  /** Position of each block id in its prompt (0 = first block). */
  readonly depth: Int32Array;
  readonly uniqueBlocks: number;
}

/**
 * `traceBlockTokens` is the replayed tokens per hash id (512 / token scale);
 * `blockTokens` the offloaded block size in the same replayed tokens.
 */
export function buildOffloadBlockAccesses(
  records: readonly TraceRecord[],
  traceBlockTokens: number,
  blockTokens: number,
): OffloadBlockAccesses {
  const T = traceBlockTokens;
  const G = blockTokens;
  const starts = new Int32Array(records.length + 1);
  const promptTokens = new Int32Array(records.length);
  for (let i = 0; i < records.length; i++) {
    promptTokens[i] = records[i].inputLength;
    starts[i + 1] = starts[i] + Math.floor(records[i].inputLength / G);
  }
  const blocks = new Int32Array(starts[records.length]);

  // Trie of hash id chains: one node per distinct prefix of trace blocks.
  const nodeOf = new Map<string, number>();
  // First block id of the offloaded blocks ending inside each node's trace block (-1: not yet named).
  const firstBlockOfNode: number[] = [];
  const depthOfId: number[] = [];
  let idSpace = 0;
  const chain: number[] = [];

  for (let i = 0; i < records.length; i++) {
    const { hashIds, inputLength, line } = records[i];
    if (hashIds.length * T < inputLength) {
      throw new RangeError(`trace line ${line}: ${hashIds.length} hash ids cannot cover ${inputLength} tokens of ${T}-token blocks`);
    }
    chain.length = 0;
    let parent = -1;
    for (let d = 0; d < hashIds.length; d++) {
      const key = `${parent}:${hashIds[d]}`;
      let node = nodeOf.get(key);
      if (node === undefined) {
        node = nodeOf.size;
        nodeOf.set(key, node);
        firstBlockOfNode.push(-1);
      }
      chain.push(node);
      parent = node;
    }
    const fullBlocks = Math.floor(inputLength / G);
    for (let k = 0; k < fullBlocks; k++) {
      const end = (k + 1) * G;
      const d = Math.floor((end - 1) / T);
      const node = chain[d];
      const firstEndIndex = Math.floor((d * T) / G);
      if (firstBlockOfNode[node] === -1) {
        firstBlockOfNode[node] = idSpace;
        const endsInNode = Math.floor(((d + 1) * T) / G) - firstEndIndex;
        for (let j = 0; j < endsInNode; j++) depthOfId.push(firstEndIndex + j);
        idSpace += endsInNode;
      }
      blocks[starts[i] + k] = firstBlockOfNode[node] + (end / G - firstEndIndex - 1);
    }
  }
  const dense = renumberInOrderOfUse(blocks, idSpace, depthOfId);
  return { blockTokens: G, blocks, starts, promptTokens, depth: dense.depth, uniqueBlocks: dense.count };
}

/**
 * Ids are handed out per trace block, so an id can belong to a block past
 * every prompt's end. Renumbers `blocks` in place to 0..count-1 in order of
 * first use and carries each id's depth along.
 */
function renumberInOrderOfUse(blocks: Int32Array, idSpace: number, depthOfId: readonly number[]): { count: number; depth: Int32Array } {
  const newId = new Int32Array(idSpace).fill(-1);
  const depth: number[] = [];
  for (let t = 0; t < blocks.length; t++) {
    const old = blocks[t];
    if (newId[old] === -1) {
      newId[old] = depth.length;
      depth.push(depthOfId[old]);
    }
    blocks[t] = newId[old];
  }
  return { count: depth.length, depth: Int32Array.from(depth) };
}
