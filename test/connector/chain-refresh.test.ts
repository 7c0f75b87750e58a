import { describe, expect, it } from 'vitest';
import type { BlockHash } from '../../src/core/block-hash.js';
import { EVICTION_POLICY_NAMES, type EvictionPolicyName } from '../../src/config/eviction-policy-names.js';
import { ForwardingManager } from '../../src/offload/forwarding-manager.js';
import type { OffloadingManager } from '../../src/offload/manager.js';
import { OffloadHarness, offloadedKeysOf, promptOf } from './helpers.js';

/**
 * A conversation's chain in the CPU tier under pressure, end to end: turn 1
 * stores its prompt's blocks and, one decode step at a time, the blocks of
 * its answer; another request's store then needs room. Every store refreshes
 * the chain it extends, so eviction takes the chain's tail and turn 2, which
 * reads the whole chain again, still finds its head in the tier.
 */

const BLOCK_SIZE = 4;
/** Turn 1: a prompt of 4 blocks and an answer that fills 4 more. */
const PROMPT_BLOCKS = 4;
const ANSWER_TOKENS = 4 * BLOCK_SIZE + 1;
const CHAIN_BLOCKS = 8;
/** The other request stores 6 blocks into a tier of 12 holding the 8 of turn 1: 2 must go. */
const CPU_BLOCKS = 12;
const OTHER_BLOCKS = 6;

/** A manager that drops every chain refresh: the tier hears of a chain only at its lookup. */
class RefreshDropping extends ForwardingManager {
  override refresh(): void {}
}

interface ConversationOutcome {
  /** Blocks of turn 1's chain the tier holds, from its first, once the other request stored. */
  readonly heldPrefix: number;
  /** The chain's blocks the tier does not hold then. */
  readonly evicted: readonly BlockHash[];
  readonly chain: readonly BlockHash[];
  /** Tokens turn 2 got from the CPU tier. */
  readonly turnTwoCpuHitTokens: number;
}

async function conversation(eviction: EvictionPolicyName, wrapManager?: (m: OffloadingManager) => OffloadingManager): Promise<ConversationOutcome> {
  const h = new OffloadHarness({ eviction, cpuBlocks: CPU_BLOCKS, wrapManager, scheduler: { blockSize: BLOCK_SIZE } });
  const prompt = promptOf(PROMPT_BLOCKS * BLOCK_SIZE, 11);
  await h.serve('turn-1', { prompt, maxTokens: ANSWER_TOKENS });
  const history = [...prompt, ...(h.outputs.get('turn-1') as number[])];
  const chain = offloadedKeysOf(history, BLOCK_SIZE, 1).slice(0, CHAIN_BLOCKS);
  expect(h.manager.lookup(chain)).toBe(CHAIN_BLOCKS);

  await h.serve('other', { prompt: promptOf(OTHER_BLOCKS * BLOCK_SIZE, 12), maxTokens: 1 });
  const heldPrefix = h.manager.lookup(chain) ?? 0;
  const evicted = chain.filter((key) => h.manager.lookup([key]) === 0);

  h.forgetGpuCache();
  const before = h.connector.metrics().cpuTierHitTokens;
  await h.serve('turn-2', { prompt: [...history, ...promptOf(2 * BLOCK_SIZE, 13)], maxTokens: 1 });
  expect(h.wrongOutputs()).toEqual([]);
  return { heldPrefix, evicted, chain, turnTwoCpuHitTokens: h.connector.metrics().cpuTierHitTokens - before };
}

describe.each(EVICTION_POLICY_NAMES)('a stored chain under %s eviction', (eviction) => {
  it("is evicted from its tail, so the next turn still reads the chain's head from the CPU tier", async () => {
    const outcome = await conversation(eviction);
    expect(outcome.evicted).toEqual(outcome.chain.slice(CHAIN_BLOCKS - 2));
    expect(outcome.heldPrefix).toBe(CHAIN_BLOCKS - 2);
    expect(outcome.turnTwoCpuHitTokens).toBe((CHAIN_BLOCKS - 2) * BLOCK_SIZE);
  });

  it('loses its head or a middle block when stores do not refresh it (the tier hears of it only at lookups)', async () => {
    const outcome = await conversation(eviction, (manager) => new RefreshDropping(manager));
    expect(outcome.evicted).toHaveLength(2);
    expect(outcome.heldPrefix).toBeLessThan(CHAIN_BLOCKS - 2);
    expect(outcome.turnTwoCpuHitTokens).toBeLessThan((CHAIN_BLOCKS - 2) * BLOCK_SIZE);
  });
});
