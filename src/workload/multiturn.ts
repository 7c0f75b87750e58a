import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import type { FinishedRequest } from '../runtime/engine-types.js';
import { MinHeap } from './min-heap.js';
import { SeededRandom, seedFrom } from '../core/prng.js';
import type { ArrivingRequest, Workload, WorkloadRequestSpec } from './workload.js';

/**
 * Built-in multi-turn chat workload. Conversations share a system prompt and
 * run `rounds` rounds each; round r+1's prompt is round r's prompt, round r's
 * actual output tokens and a new user turn, arriving a think time after round
 * r finished. Every request therefore re-reads its whole history, and the
 * previous answer's blocks are reusable too, as in a real chat service.
 *
 * Token content is a function of the seed alone (prompts also include model
 * outputs, which the reference model makes deterministic); only arrival times
 * depend on how fast the engine serves the rounds.
 */

const intRange = (min: number) =>
  z
    .object({ min: z.number().int().min(min), max: z.number().int().min(min) })
    .strict()
    .refine((r) => r.min <= r.max, { message: 'min must not exceed max' });

export const multiturnOptionsSchema = z
  .object({
    /** Requests over all conversations: ceil(requests / rounds) conversations; the last may be shorter. */
    requests: z.number().int().min(1),
    rounds: z.number().int().min(1),
    seed: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    vocabSize: z.number().int().min(2),
    systemPromptTokens: z.number().int().min(0),
    userTurnTokens: intRange(1),
    outputTokens: intRange(1),
    thinkTimeMs: intRange(0),
    /** Gap between the first rounds of consecutive conversations. */
    conversationStaggerMs: z.number().min(0),
    /** A conversation ends before a round whose prompt plus output budget would exceed this. */
    maxContextTokens: z.number().int().min(2).nullable(),
  })
  .strict();

export type MultiturnOptions = z.infer<typeof multiturnOptionsSchema>;

/**
 * Defaults sized for `npm start`: the tiny model on two host ranks with
 * 16-token blocks (RUN_DEFAULTS), about a minute on two cores. 128
 * conversations x 12 rounds; a conversation grows by about 128 + 64 tokens a
 * round, to ~2.8k tokens, and its rounds arrive 1-3 s of think time apart.
 * About 50 conversations are live on average (95 at the peak), holding ~5k
 * distinct 16-token blocks (10k at the peak): several times the 2048-block
 * GPU pool, so a conversation thinking between rounds loses its blocks to
 * the others. The ~18k blocks the conversations store fit the 32768-block
 * CPU tier, so with offloading the next round loads its history instead of
 * recomputing it. Measured with
 * `kvtier run --compare` on two cores (host backend): 2.6M prompt tokens, of
 * which 1.72M are computed without the CPU tier and 0.21M with it; TTFT p50
 * 42 ms -> 5 ms, p90 903 ms -> 47 ms; 64 s -> 57 s of wall time.
 */
export const MULTITURN_DEFAULTS = {
  requests: 1536,
  rounds: 12,
  seed: 1,
  systemPromptTokens: 512,
  userTurnTokens: { min: 64, max: 192 },
  outputTokens: { min: 32, max: 96 },
  thinkTimeMs: { min: 1000, max: 3000 },
  conversationStaggerMs: 250,
  maxContextTokens: null,
} as const satisfies Omit<MultiturnOptions, 'vocabSize'>;

/** Validates options, naming the offending field. */
export function multiturnOptions(input: Partial<MultiturnOptions> & { vocabSize: number }): MultiturnOptions {
  const parsed = multiturnOptionsSchema.safeParse({ ...MULTITURN_DEFAULTS, ...input });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(`multiturn workload: ${issue.path.join('.') || 'options'}: ${issue.message}`);
  }
  return parsed.data;
}

/** Seeds the shared system prompt's stream; each round's stream is seeded by (seed, conversation, round). */
const SYSTEM_PROMPT_STREAM = 0x5157;

interface Conversation {
  readonly index: number;
  readonly rounds: number;
  /** Prompt of the round in flight or pending. */
  prompt: Int32Array;
  round: number;
}

interface Pending {
  readonly request: ArrivingRequest;
  readonly order: number;
}

/** What one round draws from its own seeded stream, in a fixed order. */
interface RoundDraw {
  readonly userTurn: Int32Array;
  readonly maxTokens: number;
  readonly thinkMs: number;
  readonly requestSeed: number;
}

export class MultiturnWorkload implements Workload {
  readonly description: string;
  readonly plannedRequests: number;
  private readonly options: MultiturnOptions;
  private readonly systemPrompt: Int32Array;
  private readonly pending = new MinHeap<Pending>(
    (a, b) => a.request.arrivalMs < b.request.arrivalMs || (a.request.arrivalMs === b.request.arrivalMs && a.order < b.order),
  );
  /** Requests scheduled (pending or in the engine) and not yet finished, by id. */
  private readonly unfinished = new Map<string, Conversation>();
  private order = 0;

  constructor(options: Partial<MultiturnOptions> & { vocabSize: number }) {
    this.options = multiturnOptions(options);
    const { requests, rounds, seed, systemPromptTokens, vocabSize } = this.options;
    const conversations = Math.ceil(requests / rounds);
    this.plannedRequests = requests;
    this.description = `multiturn: ${conversations} conversations x up to ${rounds} rounds (${requests} requests, seed ${seed})`;
    this.systemPrompt = new SeededRandom(seedFrom(seed, SYSTEM_PROMPT_STREAM)).tokens(systemPromptTokens, vocabSize);
    for (let c = 0; c < conversations; c++) {
      const draw = this.drawRound(c, 0);
      const conversation: Conversation = {
        index: c,
        rounds: Math.min(rounds, requests - c * rounds),
        prompt: concatTokens(this.systemPrompt, draw.userTurn),
        round: 0,
      };
      if (!this.fitsContext(conversation.prompt, draw)) continue;
      this.schedule(conversation, draw, c * this.options.conversationStaggerMs);
    }
  }

  takeDue(nowMs: number, limit = Infinity): ArrivingRequest[] {
    const due: ArrivingRequest[] = [];
    while (due.length < limit) {
      const next = this.pending.peek();
      if (next === undefined || next.request.arrivalMs > nowMs) break;
      this.pending.pop();
      due.push(next.request);
    }
    return due;
  }

  nextArrivalMs(): number | null {
    return this.pending.peek()?.request.arrivalMs ?? null;
  }

  onFinished(finished: FinishedRequest, nowMs: number): void {
    const conversation = this.unfinished.get(finished.id);
    if (conversation === undefined) {
      throw new Error(`multiturn workload: request "${finished.id}" was not issued or already finished`);
    }
    this.unfinished.delete(finished.id);
    // A failed or aborted round ends its conversation: the user got no answer to build on.
    if (finished.finishReason !== 'length' && finished.finishReason !== 'stopped') return;
    const nextRound = conversation.round + 1;
    if (nextRound >= conversation.rounds) return;
    const draw = this.drawRound(conversation.index, nextRound);
    const prompt = concatTokens(conversation.prompt, Int32Array.from(finished.outputTokens), draw.userTurn);
    if (!this.fitsContext(prompt, draw)) return;
    conversation.prompt = prompt;
    conversation.round = nextRound;
    this.schedule(conversation, draw, nowMs + draw.thinkMs);
  }

  done(): boolean {
    // Pending requests are unfinished too, so this also means nothing is pending.
    return this.unfinished.size === 0;
  }

  private schedule(conversation: Conversation, draw: RoundDraw, arrivalMs: number): void {
    const spec: WorkloadRequestSpec = {
      id: `mt-c${conversation.index}-r${conversation.round}`,
      promptTokens: conversation.prompt,
      maxTokens: draw.maxTokens,
      seed: draw.requestSeed,
    };
    this.unfinished.set(spec.id, conversation);
    this.pending.push({ request: { arrivalMs, spec }, order: this.order++ });
  }

  private fitsContext(prompt: Int32Array, draw: RoundDraw): boolean {
    const limit = this.options.maxContextTokens;
    return limit === null || prompt.length + draw.maxTokens <= limit;
  }

  private drawRound(conversation: number, round: number): RoundDraw {
    const { seed, vocabSize, userTurnTokens, outputTokens, thinkTimeMs } = this.options;
    const rng = new SeededRandom(seedFrom(seed, conversation + 1, round + 1));
    const userLength = rng.nextInt(userTurnTokens.min, userTurnTokens.max);
    return {
      userTurn: rng.tokens(userLength, vocabSize),
      maxTokens: rng.nextInt(outputTokens.min, outputTokens.max),
      thinkMs: rng.nextInt(thinkTimeMs.min, thinkTimeMs.max),
      requestSeed: rng.nextUint32(),
    };
  }
}

function concatTokens(...parts: readonly Int32Array[]): Int32Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Int32Array(length);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}
