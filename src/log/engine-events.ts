import type { RankError } from '../core/errors.js';
import type { FaultPlan, FaultRule } from '../faults/plan.js';
import type { RankStepOutput } from '../protocol/step-protocol.js';

/**
 * The logger the engine writes to: pino's Logger fits, and so does anything
 * with these four methods. Structured fields first, message second.
 */
export interface EngineLogger {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface EngineEventLogOptions {
  /** A step whose wall time exceeds this is logged (warn); null: never. */
  readonly slowStepMs?: number | null;
}

/** A fault rule as one line of text: `load-fail rank=1 p=0.05`. */
function describeRule(rule: FaultRule): string {
  const fields = Object.entries(rule)
    .filter(([key, value]) => key !== 'kind' && value !== null && !(Array.isArray(value) && value.length === 0))
    .map(([key, value]) => `${key}=${Array.isArray(value) ? value.join('|') : String(value)}`);
  return [rule.kind, ...fields].join(' ');
}

/**
 * What the engine logs: rank deaths and restarts, fault-plan activations and
 * slow steps. Nothing per request. Every call is a no-op without a logger,
 * and the per-step check is two comparisons.
 */
export class EngineEventLog {
  private readonly slowStepMs: number;
  /** Step number at which each delayed rule becomes active. */
  private readonly activations = new Map<number, FaultRule[]>();
  /** Ranks whose first injected load failure was logged. */
  private readonly injectionSeen = new Set<number>();

  constructor(
    private readonly logger: EngineLogger | null,
    plan: FaultPlan | null,
    options: EngineEventLogOptions = {},
  ) {
    this.slowStepMs = options.slowStepMs ?? Number.POSITIVE_INFINITY;
    if (logger === null || plan === null) return;
    for (const rule of plan.rules) {
      logger.info({ event: 'fault_rule_armed', rule: describeRule(rule) }, `fault plan: ${describeRule(rule)}`);
      const after = 'after' in rule ? rule.after : 0;
      if (after > 0) {
        const rules = this.activations.get(after) ?? [];
        rules.push(rule);
        this.activations.set(after, rules);
      }
    }
  }

  /** A step ran every rank and took `wallMs` milliseconds end to end. */
  stepFinished(step: number, wallMs: number, outputs: readonly RankStepOutput[]): void {
    const logger = this.logger;
    if (logger === null) return;
    if (this.activations.size > 0) {
      const rules = this.activations.get(step);
      if (rules !== undefined) {
        this.activations.delete(step);
        for (const rule of rules) {
          logger.warn({ event: 'fault_rule_active', step, rule: describeRule(rule) }, `fault plan: ${describeRule(rule)} active from step ${step}`);
        }
      }
    }
    for (const out of outputs) {
      if ((out.injectedLoadFailures ?? 0) > 0 && !this.injectionSeen.has(out.rank)) {
        this.injectionSeen.add(out.rank);
        logger.warn(
          { event: 'fault_injected', step, rank: out.rank, blocks: out.injectedLoadFailures },
          `fault plan: first injected load failure on rank ${out.rank} at step ${step}`,
        );
      }
    }
    if (wallMs > this.slowStepMs) {
      let slowest = outputs[0];
      for (const out of outputs) if (out.stepMs > slowest.stepMs) slowest = out;
      logger.warn(
        {
          event: 'slow_step',
          step,
          ms: round(wallMs),
          thresholdMs: this.slowStepMs,
          slowestRank: slowest?.rank ?? null,
          slowestRankMs: slowest === undefined ? null : round(slowest.stepMs),
        },
        `step ${step} took ${round(wallMs)} ms (over ${this.slowStepMs} ms)`,
      );
    }
  }

  /** A rank died or missed a deadline. */
  rankLost(step: number, error: RankError, willRestart: boolean): void {
    this.logger?.[willRestart ? 'warn' : 'error'](
      { event: 'rank_lost', step, rank: error.rank, cause: error.cause_ },
      `rank ${error.rank} lost at step ${step}: ${error.cause_}${willRestart ? ' (restarting)' : ''}`,
    );
  }

  /** Dead ranks were respawned and every rank reset; requests resume by recompute. */
  ranksRestarted(step: number, ranks: readonly number[], attempt: number): void {
    for (const rank of ranks) {
      this.logger?.warn({ event: 'rank_restarted', step, rank, attempt }, `rank ${rank} restarted (attempt ${attempt})`);
    }
  }

  /** The engine gave up: every unfinished request ended with an error. */
  engineStopped(step: number, error: RankError, failedRequests: number): void {
    this.logger?.error(
      { event: 'engine_stopped', step, rank: error.rank, cause: error.cause_, failedRequests },
      `engine stopped at step ${step}: ${error.message}`,
    );
  }
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
