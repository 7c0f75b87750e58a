import type { Request } from './request.js';

/**
 * Where each KV position of each request came from, counted once per
 * position (README, "The report").
 *
 * A request reaches its positions in order: position p is reached the first
 * time its KV is there, served by a cache tier (a hit) or computed. Serving
 * or computing a position the request had reached before (after a
 * preemption, a rank loss, or a failed load that invalidated KV it had used)
 * is a reread or a recomputation, never a hit. So, at any time,
 *
 *   hits (GPU prefix + CPU tier) + prefill computed = prompt reached + recomputed
 *
 * where prompt reached counts every prompt position reached once, i.e. the
 * prompt tokens of every request past its prompt (all but the requests that
 * failed or were aborted first, and the ones still in it).
 *
 * Counting happens when the positions are used: when a step computes a
 * request's tokens [start, end), every position below `start` not yet
 * accounted in the current admission was served by the tier the admission
 * found it in. By then an asynchronous load has completed and any failure
 * was applied (the request was cut back to the first invalid block), so a
 * failed load is never a hit, and the last prompt token, which is always
 * computed (its logits give the first output token), is never a hit either.
 * A connector that loads synchronously (in the step that first uses the
 * tokens) is counted at that use as well; if its load then fails, the
 * tokens computed again are recomputed tokens. The CPU tier always loads
 * asynchronously.
 */
export class TokenLedger {
  /** Positions first reached by serving them from the GPU prefix cache / from the connector (CPU tier). */
  gpuPrefixHitTokens = 0;
  cpuTierHitTokens = 0;
  /** Positions served again: reached before by the same request. */
  gpuPrefixRereadTokens = 0;
  cpuTierRereadTokens = 0;
  /** Prompt positions computed for the first time, plus every position computed again. */
  prefillTokensComputed = 0;
  /** Output positions computed for the first time (one per decode step). */
  decodeTokensComputed = 0;
  /** Positions computed again: reached before by the same request. */
  recomputedTokens = 0;
  /** Prompt positions reached (served or computed) for the first time. */
  promptTokensReached = 0;

  /**
   * @param externalServed told, when a request uses tokens the connector served, how many were
   *   hits and how many rereads (the connector's own counters).
   */
  constructor(private readonly externalServed: ((request: Request, hits: number, rereads: number) => void) | null = null) {}

  /**
   * The request was (re)admitted with a fresh block table: its GPU prefix hit
   * covers [0, gpuEnd), the connector's tokens [gpuEnd, externalEnd).
   */
  admitted(request: Request, gpuEnd: number, externalEnd: number): void {
    request.accountedTokens = 0;
    request.admittedGpuEnd = gpuEnd;
    request.admittedExternalEnd = externalEnd;
  }

  /** A step computes the request's positions [start, end). */
  computed(request: Request, start: number, end: number): void {
    if (request.accountedTokens < start) this.served(request, request.accountedTokens, start);
    const reached = request.reachedTokens;
    request.accountedTokens = end;
    // A decode step: one new output position, nothing served, nothing again.
    if (start === reached && end === start + 1 && start >= request.numPromptTokens) {
      this.decodeTokensComputed++;
      request.reachedTokens = end;
      return;
    }
    const firstFrom = Math.max(start, reached);
    const again = Math.max(0, Math.min(end, reached) - start);
    const firstPrompt = Math.max(0, Math.min(end, request.numPromptTokens) - firstFrom);
    const firstOutput = Math.max(0, end - firstFrom) - firstPrompt;
    this.recomputedTokens += again;
    this.prefillTokensComputed += again + firstPrompt;
    this.promptTokensReached += firstPrompt;
    this.decodeTokensComputed += firstOutput;
    if (end > reached) request.reachedTokens = end;
  }

  /** Positions [from, to) of the current admission were served by the tiers it found them in. */
  private served(request: Request, from: number, to: number): void {
    const gpuEnd = request.admittedGpuEnd;
    const gpuTo = Math.min(to, gpuEnd);
    if (gpuTo > from) {
      const hits = this.split(request, from, gpuTo);
      this.gpuPrefixHitTokens += hits;
      this.gpuPrefixRereadTokens += gpuTo - from - hits;
      request.gpuPrefixHitTokens += hits;
      request.gpuPrefixRereadTokens += gpuTo - from - hits;
    }
    const externalFrom = Math.max(from, gpuEnd);
    const externalTo = Math.min(to, request.admittedExternalEnd);
    if (externalTo > externalFrom) {
      const hits = this.split(request, externalFrom, externalTo);
      const rereads = externalTo - externalFrom - hits;
      this.cpuTierHitTokens += hits;
      this.cpuTierRereadTokens += rereads;
      request.cpuTierHitTokens += hits;
      request.cpuTierRereadTokens += rereads;
      this.externalServed?.(request, hits, rereads);
    }
  }

  /**
   * Marks [from, to) reached and returns the prompt positions among them reached now (hits); the
   * rest are rereads. (A served position past the prompt was always reached before: an output
   * token is appended only once every position before it was computed.)
   */
  private split(request: Request, from: number, to: number): number {
    const reached = request.reachedTokens;
    const hits = Math.max(0, Math.min(to, request.numPromptTokens) - Math.max(from, reached));
    if (to > reached) request.reachedTokens = to;
    this.promptTokensReached += hits;
    return hits;
  }
}
