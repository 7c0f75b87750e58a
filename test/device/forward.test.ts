import { afterEach, describe, expect, it } from 'vitest';
import {
  chainStates,
  elementValue,
  rankDigest,
  referenceGenerate,
  sampleToken,
} from '../../src/model/reference.js';
import type { Device, KvLayout } from '../../src/device/types.js';
import {
  TINY_NO_COMPUTE,
  JobIds,
  closeAll,
  load,
  openRanks,
  openTestDevice,
  packBatch,
  randomInt,
  range,
  runJob,
  seededRandom,
  shuffled,
  store,
  type StepRequest,
} from './helpers.js';

const BLOCK = 4;
const GPU_BLOCKS = 64;
let open: Device[] = [];
afterEach(() => {
  closeAll(open);
  open = [];
});

async function ranks(tp: number, layout: KvLayout): Promise<Device[]> {
  const devices = await openRanks(tp, { layout, blockSize: BLOCK, numGpuBlocks: GPU_BLOCKS, numCpuBlocks: 8 });
  open.push(...devices);
  return devices;
}

/** A request as a scheduler would track it: its tokens, block table and progress. */
interface Sequence {
  readonly tokens: number[];
  readonly blockTable: number[];
  computed: number;
}

/** Runs one step on every rank and checks each rank's digests against the reference. */
async function stepAndCheck(devices: Device[], batch: Array<{ seq: Sequence; count: number }>): Promise<Uint32Array[]> {
  const requests: StepRequest[] = batch.map(({ seq, count }) => ({
    blockTable: seq.blockTable,
    startPosition: seq.computed,
    tokens: seq.tokens.slice(seq.computed, seq.computed + count),
    sample: seq.computed + count === seq.tokens.length,
  }));
  const digests = await Promise.all(devices.map((d) => d.forward(packBatch(requests))));
  devices.forEach((_, rank) => {
    batch.forEach(({ seq, count }, i) => {
      const end = seq.computed + count;
      const expected = requests[i].sample ? rankDigest(TINY_NO_COMPUTE, devices.length, rank, seq.tokens, end) : 0;
      expect(digests[rank][i], `rank ${rank} request ${i} at ${end}`).toBe(expected);
    });
  });
  for (const { seq, count } of batch) seq.computed += count;
  return digests;
}

function randomTokens(random: () => number, n: number): number[] {
  return Array.from({ length: n }, () => randomInt(random, 0, TINY_NO_COMPUTE.vocabSize - 1));
}

const LAYOUTS: KvLayout[] = ['cross-layer', 'per-layer'];
const CONFIGS = [1, 2, 4].flatMap((tp) => LAYOUTS.map((layout) => [tp, layout] as const));

describe.each(CONFIGS)('forward with tp = %d, %s', (tp, layout) => {
  it('digests of random multi-request, multi-chunk prefills equal the reference', async () => {
    const devices = await ranks(tp, layout);
    const random = seededRandom(tp * 31 + layout.length);
    const free = shuffled(random, range(0, GPU_BLOCKS));
    const sequences: Sequence[] = Array.from({ length: 4 }, () => {
      const tokens = randomTokens(random, randomInt(random, 1, 23));
      return { tokens, blockTable: free.splice(0, Math.ceil(tokens.length / BLOCK)), computed: 0 };
    });
    while (sequences.some((s) => s.computed < s.tokens.length)) {
      const batch = sequences
        .filter((seq) => seq.computed < seq.tokens.length && random() < 0.8)
        .map((seq) => ({ seq, count: Math.min(randomInt(random, 1, 7), seq.tokens.length - seq.computed) }));
      if (batch.length > 0) await stepAndCheck(devices, batch);
    }
  });

  it('a request reads a shared prefix block that an earlier request wrote in the same batch', async () => {
    const devices = await ranks(tp, layout);
    const random = seededRandom(99 + tp);
    const first: Sequence = { tokens: randomTokens(random, 10), blockTable: [5, 9, 2], computed: 0 };
    // Shares first's two full blocks; its own part starts right after them.
    const second: Sequence = {
      tokens: [...first.tokens.slice(0, 8), ...randomTokens(random, 5)],
      blockTable: [5, 9, 40, 41],
      computed: 8,
    };
    await stepAndCheck(devices, [
      { seq: first, count: 10 },
      { seq: second, count: 5 },
    ]);
  });
});

describe('an empty step', () => {
  it('resolves with no digests', async () => {
    const d = await openTestDevice();
    open.push(d);
    expect(await d.forward(packBatch([]))).toEqual(new Uint32Array(0));
  });
});

describe('the KV cache content', () => {
  it('is the model element values in canonical order, whatever the layout', async () => {
    const tokens = [3, 1, 4, 1, 5, 9];
    const images: Buffer[][] = [];
    for (const layout of ['cross-layer', 'per-layer'] as const) {
      const d = await openTestDevice({ layout, tp: 2, rank: 1 });
      open.push(d);
      await d.forward(packBatch([{ blockTable: [7, 3], startPosition: 0, tokens, sample: false }]));
      images.push([d.readGpuBlock(7), d.readGpuBlock(3)]);
    }
    expect(images[1][0].equals(images[0][0])).toBe(true);
    expect(images[1][1].equals(images[0][1])).toBe(true);

    // [layer][k][local head][slot][dim]; rank 1 of 2 holds global heads 2 and 3.
    const states = chainStates(TINY_NO_COMPUTE, tokens);
    const { layers, headDim: D } = TINY_NO_COMPUTE;
    const localHeads = 2;
    for (let p = 0; p < tokens.length; p++) {
      const image = images[0][Math.floor(p / 4)];
      const slot = p % 4;
      for (let l = 0; l < layers; l++) {
        for (let k = 0; k < 2; k++) {
          for (let h = 0; h < localHeads; h++) {
            for (let dim = 0; dim < D; dim++) {
              const index = ((((l * 2 + k) * localHeads + h) * 4 + slot) * D + dim) * 2;
              expect(image.readUInt16LE(index)).toBe(elementValue(TINY_NO_COMPUTE, states[p], l, k, 2 + h, dim));
            }
          }
        }
      }
    }
  });
});

describe('generation across ranks', () => {
  it('sampling from the summed rank digests reproduces referenceGenerate', async () => {
    const devices = await ranks(2, 'per-layer');
    const prompt = [17, 4, 3000, 21, 9, 9, 12];
    const maxTokens = 6;
    const seed = 0x5eed;
    const expected = referenceGenerate(TINY_NO_COMPUTE, { promptTokens: prompt, maxTokens, seed });

    const blockTable = [12, 30, 6, 51];
    const tokens = [...prompt];
    const outputs: number[] = [];
    let computed = 0;
    // Prefill in two chunks, then decode one token per step.
    const chunks = [4, prompt.length - 4];
    while (outputs.length < maxTokens) {
      const count = chunks.shift() ?? 1;
      const request: StepRequest = {
        blockTable,
        startPosition: computed,
        tokens: tokens.slice(computed, computed + count),
        sample: computed + count === tokens.length,
      };
      const digests = await Promise.all(devices.map((d) => d.forward(packBatch([request]))));
      computed += count;
      if (!request.sample) continue;
      const sum = digests.reduce((acc, g) => (acc + g[0]) >>> 0, 0);
      const token = sampleToken(sum, seed, computed, TINY_NO_COMPUTE.vocabSize);
      outputs.push(token);
      tokens.push(token);
    }
    expect(outputs).toEqual(expected.outputTokens);
  });
});

describe('the digest reflects what the cache holds', () => {
  const tokens = [8, 6, 7, 5, 3, 0, 9, 2];

  async function prefilled(): Promise<{ d: Device; jobs: JobIds; decode: () => Promise<number>; expected: number }> {
    const d = await openTestDevice();
    open.push(d);
    await d.forward(packBatch([{ blockTable: [1, 2, 3], startPosition: 0, tokens, sample: false }]));
    const decode = async () =>
      (await d.forward(packBatch([{ blockTable: [1, 2, 3], startPosition: 8, tokens: [4], sample: true }])))[0];
    return { d, jobs: new JobIds(), decode, expected: rankDigest(TINY_NO_COMPUTE, 1, 0, [...tokens, 4], 9) };
  }

  it('a block reloaded intact from the CPU tier gives the reference digest', async () => {
    const { d, jobs, decode, expected } = await prefilled();
    await runJob(d, store(jobs.take(), [1, 2], [0, 1]));
    d.writeGpuBlock(1, Buffer.alloc(d.info.bytesPerGpuBlock));
    await runJob(d, load(jobs.take(), [1, 2], [0, 1]));
    expect(await decode()).toBe(expected);
  });

  it('a poisoned block changes the digest', async () => {
    const { d, jobs, decode, expected } = await prefilled();
    await runJob(d, store(jobs.take(), [2], [0]));
    d.setFaults({ loadFailBlocks: [2] });
    const result = await runJob(d, load(jobs.take(), [2], [0]));
    expect(result.failedGpuBlockIds).toEqual([2]);
    expect(await decode()).not.toBe(expected);
  });

  it('swapped blocks change the digest', async () => {
    const { d, decode, expected } = await prefilled();
    const first = d.readGpuBlock(1);
    d.writeGpuBlock(1, d.readGpuBlock(2));
    d.writeGpuBlock(2, first);
    expect(await decode()).not.toBe(expected);
  });
});
