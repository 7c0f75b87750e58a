import { extendBlockHashes, type BlockHash } from '../core/block-hash.js';
import { RequestError } from '../core/errors.js';
import type { BlockTable } from './kv-cache-manager.js';
import type { SampledTokenUpdate, StepRequest, StepRequestView } from './step-records.js';

/**
 * One generation request as the scheduler tracks it: its tokens, its progress
 * (computed tokens), its lifecycle status and the chained hashes of its full
 * blocks (the keys of the GPU prefix cache and of the CPU tier).
 */

/** Why a request finished (reported to the caller with its tokens). */
export type FinishReason = 'length' | 'stopped' | 'aborted' | 'error';

export type RequestStatus =
  | 'waiting'
  /** Waiting for its CPU-tier hits to be loaded onto the GPU (vLLM: WAITING_FOR_REMOTE_KVS). */
  | 'waitingForCpuTierLoad'
  | 'running'
  | 'preempted'
  | 'finishedLength'
  | 'finishedStopped'
  | 'finishedAborted'
  | 'finishedError';

export type FinishedStatus = 'finishedLength' | 'finishedStopped' | 'finishedAborted' | 'finishedError';

export function isFinishedStatus(status: RequestStatus): status is FinishedStatus {
  return (
    status === 'finishedLength' ||
    status === 'finishedStopped' ||
    status === 'finishedAborted' ||
    status === 'finishedError'
  );
}

/** The user-facing finish reason of a finished status. */
export function finishReasonOf(status: FinishedStatus): FinishReason {
  switch (status) {
    case 'finishedLength':
      return 'length';
    case 'finishedStopped':
      return 'stopped';
    case 'finishedAborted':
      return 'aborted';
    case 'finishedError':
      return 'error';
  }
}

export interface RequestParams {
  readonly id: string;
  readonly promptTokens: ArrayLike<number>;
  readonly maxTokens: number;
  readonly stopToken?: number | null;
  /** Sampling seed (uint32); default 0. */
  readonly seed?: number;
  /** Engine clock (ms) at arrival; default 0. */
  readonly arrivalTime?: number;
  /** Extra hash key: requests with different salts never share cached KV. */
  readonly cacheSalt?: string | null;
  /** Hashes of the prompt's full blocks, when already computed (e.g. by a hashing worker pool). */
  readonly promptBlockHashes?: readonly BlockHash[];
}

/** What a request is validated against. */
export interface RequestLimits {
  readonly vocabSize: number;
  readonly maxModelLen: number;
  readonly blockSize: number;
}

const UINT32_MAX = 0xffffffff;
/** Tokens a request holds outside its token buffer (see Request.tail): 64 bytes, which V8 keeps in the object heap. */
const TAIL_TOKENS = 16;

export class Request {
  readonly id: string;
  readonly promptTokens: Int32Array;
  readonly maxTokens: number;
  readonly stopToken: number | null;
  readonly seed: number;
  readonly arrivalTime: number;
  readonly cacheSalt: string | null;
  readonly blockSize: number;
  /** Chained hashes of every full block of prompt + output tokens. */
  readonly blockHashes: BlockHash[];

  status: RequestStatus = 'waiting';
  numComputedTokens = 0;
  numPreemptions = 0;
  errorMessage: string | null = null;

  /** Engine clock (ms) when the request first computed tokens, got its first output token, finished. */
  firstScheduledTime: number | null = null;
  firstTokenTime: number | null = null;
  finishTime: number | null = null;
  /**
   * Prompt tokens first reached by being served from the GPU prefix cache / by the connector (CPU
   * tier), and positions served again after they were reached (rereads); see TokenLedger.
   */
  gpuPrefixHitTokens = 0;
  cpuTierHitTokens = 0;
  /** Of cpuTierHitTokens: tokens in CPU-tier blocks the remote tier filled (set by the remote connector). */
  remoteHitTokens = 0;
  gpuPrefixRereadTokens = 0;
  cpuTierRereadTokens = 0;
  /** Positions [0, reachedTokens) had KV at some point (served or computed); never lowered. */
  reachedTokens = 0;
  /** Positions of the current admission already counted by the TokenLedger (served or computed). */
  accountedTokens = 0;
  /** The current admission's GPU prefix hit ends here, and the connector's tokens after it. */
  admittedGpuEnd = 0;
  admittedExternalEnd = 0;
  /** Its GPU block table while it holds blocks; set and cleared by the KVCacheManager that owns it. */
  blockTable: BlockTable | null = null;
  /** The scheduler whose workers hold this request's state (block table, tokens so far), if any; set by it. */
  knownToWorkersOf: object | null = null;
  /** The connector's view of this request in the step being built, refilled every step (see StepRequestView). */
  connectorView: StepRequestView | null = null;
  /** Its part of the latest step that scheduled it and its latest sampled-token update, refilled in place (see step-records.ts). */
  stepRecord: StepRequest | null = null;
  tokenUpdate: SampledTokenUpdate | null = null;
  /** What the caller that added it keeps with it (ServingEngine: its ticket), handed back on each of its updates so delivery needs no lookup by id. */
  owner: unknown = null;

  /** Prompt and prompt + output token counts, kept as fields so the hot path reads the request alone, not its arrays. */
  private readonly promptLength: number;
  private tokenCount: number;

  /**
   * Prompt and output tokens in one buffer sized for the longest possible
   * request (prompt + maxTokens), so hashing a block never copies. It holds
   * the first `storedCount` tokens; the rest (fewer than TAIL_TOKENS) sit in
   * `tail`, a few bytes allocated with the request itself. A decode step
   * appends to the tail, and the tail is moved to the buffer when a block
   * fills or the tail does: with thousands of requests, writing each token
   * straight into its request's kilobytes-apart buffer touched one more page
   * per request per step, and those misses made the step's cost per request
   * grow with the number of requests.
   */
  private readonly allTokens: Int32Array;
  private readonly tail = new Int32Array(TAIL_TOKENS);
  private storedCount: number;

  /** Use createRequest: it validates the parameters first. */
  constructor(params: RequestParams, blockSize: number) {
    this.id = params.id;
    const prompt = params.promptTokens;
    this.maxTokens = params.maxTokens;
    this.stopToken = params.stopToken ?? null;
    this.seed = params.seed ?? 0;
    this.arrivalTime = params.arrivalTime ?? 0;
    this.cacheSalt = params.cacheSalt ?? null;
    this.blockSize = blockSize;
    // One copy from the caller's tokens into the buffer, then the prompt's own array from there: Int32Array.from
    // on a view of a SharedArrayBuffer (the arrival ring's prompts) takes a slow path, about twice a copy's time.
    this.allTokens = new Int32Array(prompt.length + this.maxTokens);
    this.allTokens.set(prompt);
    this.promptLength = prompt.length;
    this.promptTokens = this.allTokens.slice(0, this.promptLength);
    this.tokenCount = this.promptLength;
    this.storedCount = this.promptLength;
    this.blockHashes = params.promptBlockHashes ? params.promptBlockHashes.slice() : [];
    extendBlockHashes(this.blockHashes, this.allTokens, this.promptLength, blockSize, this.cacheSalt);
  }

  get numPromptTokens(): number {
    return this.promptLength;
  }

  /** The output tokens so far: a fresh array on every call, read from the token buffer. */
  get outputTokens(): number[] {
    return this.tokensBetween(this.promptLength, this.tokenCount);
  }

  get numOutputTokens(): number {
    return this.tokenCount - this.promptLength;
  }

  /** Prompt + output tokens. */
  get numTokens(): number {
    return this.tokenCount;
  }

  get isFinished(): boolean {
    return isFinishedStatus(this.status);
  }

  /** The token at `position` of prompt + output. */
  tokenAt(position: number): number {
    const stored = this.storedCount;
    return position < stored ? this.allTokens[position] : this.tail[position - stored];
  }

  /** Copies the tokens at positions [start, end) into `into` from index `at` (BlockTokenSource: a block run's tokens into the KV event ring). */
  copyTokens(start: number, end: number, into: Int32Array, at: number): void {
    if (end <= this.storedCount) {
      // Full blocks are in the token buffer (a block's tail is stored as it fills).
      const all = this.allTokens;
      for (let i = start; i < end; i++) into[at + i - start] = all[i];
      return;
    }
    for (let i = start; i < end; i++) into[at + i - start] = this.tokenAt(i);
  }

  /** Tokens at positions [start, end) as a plain array (it crosses threads). */
  tokensBetween(start: number, end: number): number[] {
    const out = new Array<number>(end - start);
    for (let i = start; i < end; i++) out[i - start] = this.tokenAt(i);
    return out;
  }

  /** Appends a sampled token and hashes the block it completes, if any. */
  appendOutputToken(token: number): void {
    if (this.tokenCount - this.promptLength >= this.maxTokens) {
      throw new RequestError(`request '${this.id}': cannot append beyond maxTokens ${this.maxTokens}`);
    }
    if (this.tokenCount - this.storedCount === TAIL_TOKENS) this.storeTail();
    this.tail[this.tokenCount - this.storedCount] = token;
    const numTokens = this.tokenCount + 1;
    this.tokenCount = numTokens;
    if (numTokens % this.blockSize === 0) {
      this.storeTail();
      extendBlockHashes(this.blockHashes, this.allTokens, numTokens, this.blockSize, this.cacheSalt);
    }
  }

  /** Moves the tail's tokens to the token buffer. */
  private storeTail(): void {
    const stored = this.storedCount;
    const tail = this.tail;
    const buffer = this.allTokens;
    const count = this.tokenCount - stored;
    for (let i = 0; i < count; i++) buffer[stored + i] = tail[i];
    this.storedCount = this.tokenCount;
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string') return `'${value}'`;
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) {
    return String(value);
  }
  return Object.prototype.toString.call(value);
}

function isInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value);
}

/**
 * Checks a request against the model and engine limits. Throws RequestError
 * naming the field and the offending value.
 */
export function validateRequestParams(params: RequestParams, limits: RequestLimits): void {
  const where = typeof params.id === 'string' ? `request '${params.id}'` : 'request';
  if (typeof params.id !== 'string' || params.id.length === 0) {
    throw new RequestError(`${where}: id must be a non-empty string, got ${describe(params.id)}`);
  }
  const prompt = params.promptTokens;
  if (prompt == null || typeof prompt.length !== 'number') {
    throw new RequestError(`${where}: promptTokens must be an array of token ids, got ${describe(prompt)}`);
  }
  if (prompt.length === 0) {
    throw new RequestError(`${where}: promptTokens is empty; a prompt needs at least one token`);
  }
  for (let i = 0; i < prompt.length; i++) {
    const t = prompt[i];
    if (!isInteger(t) || t < 0 || t >= limits.vocabSize) {
      throw new RequestError(
        `${where}: promptTokens[${i}] = ${describe(t)} is outside the vocabulary [0, ${limits.vocabSize})`,
      );
    }
  }
  if (!isInteger(params.maxTokens) || params.maxTokens < 1) {
    throw new RequestError(`${where}: maxTokens must be an integer >= 1, got ${describe(params.maxTokens)}`);
  }
  if (prompt.length + params.maxTokens > limits.maxModelLen) {
    throw new RequestError(
      `${where}: promptTokens.length ${prompt.length} + maxTokens ${params.maxTokens} = ` +
        `${prompt.length + params.maxTokens} exceeds maxModelLen ${limits.maxModelLen}`,
    );
  }
  const stop = params.stopToken;
  if (stop != null && (!isInteger(stop) || stop < 0 || stop >= limits.vocabSize)) {
    throw new RequestError(`${where}: stopToken ${describe(stop)} is outside the vocabulary [0, ${limits.vocabSize})`);
  }
  const seed = params.seed;
  if (seed !== undefined && (!isInteger(seed) || seed < 0 || seed > UINT32_MAX)) {
    throw new RequestError(`${where}: seed must be an integer in [0, ${UINT32_MAX}], got ${describe(seed)}`);
  }
  const arrival = params.arrivalTime;
  if (arrival !== undefined && (typeof arrival !== 'number' || !Number.isFinite(arrival))) {
    throw new RequestError(`${where}: arrivalTime must be a finite number (ms), got ${describe(arrival)}`);
  }
  const salt = params.cacheSalt;
  if (salt != null && typeof salt !== 'string') {
    throw new RequestError(`${where}: cacheSalt must be a string or null, got ${describe(salt)}`);
  }
  const hashes = params.promptBlockHashes;
  if (hashes !== undefined) {
    const expected = Math.floor(prompt.length / limits.blockSize);
    if (!Array.isArray(hashes) || hashes.length !== expected) {
      throw new RequestError(
        `${where}: promptBlockHashes must hold one hash per full prompt block (${expected}), ` +
          `got ${Array.isArray(hashes) ? hashes.length : describe(hashes)}`,
      );
    }
    for (let i = 0; i < hashes.length; i++) {
      if (typeof hashes[i] !== 'string' || !/^[0-9a-f]{16}$/.test(hashes[i])) {
        throw new RequestError(`${where}: promptBlockHashes[${i}] = ${describe(hashes[i])} is not a 16-hex-digit hash`);
      }
    }
  }
}

/** Validates `params` and builds the request. */
export function createRequest(params: RequestParams, limits: RequestLimits): Request {
  validateRequestParams(params, limits);
  return new Request(params, limits.blockSize);
}
