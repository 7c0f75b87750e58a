import { z } from 'zod';
import { KvtierError } from '../core/errors.js';
import { ERROR_CODES } from '../core/error-codes.js';

/**
 * Fault plans: one format for tests, the library config and `--faults`.
 *
 *   load-fail:rank=1,p=0.05;store-fail:rank=*,p=0.01;delay:rank=2,ms=3;crash:rank=1,step=40;hang:rank=0,step=25
 *
 * Rules are separated by ';', a rule is `kind:key=value,...`. `rank=*` (the
 * default) targets every rank. `load-fail` also takes `blocks=3|7` (GPU block
 * ids), `after=STEP` (active from that step on) and `count=N` (at most N failed
 * blocks on each targeted rank).
 *
 * `crash` and `hang` say when the rank dies with exactly one of: `step=S`
 * (during step S), `open=N` (right after it opened its device for the N-th
 * time: 1 at engine start, 2 at its first restart, ...) or `reset=N` (during
 * the engine's N-th rank-loss reset, 1 being the first).
 *
 * `stall:rank=R[,after=S][,steps=N]` holds back the transfers the targeted
 * ranks submit from step S on: one starts when a forward needs its blocks, a
 * transfer is ordered after it, something waits for it (a preemption flush, a
 * drain), or, with `steps=N`, N rank steps after the one that submitted it.
 * It orders a scenario by events and steps where `delay` orders it by wall
 * time. Without `steps` it is meant for tests: a request waiting for a
 * stalled load waits until the rank drains.
 *
 * Remote tier faults: `remote-fail:rank=R,p=P[,after=S]` fails each remote
 * read or write job part on the targeted ranks with probability P;
 * `remote-down:step=S[,steps=N]` makes the remote unreachable from step S
 * (for N steps, or for the rest of the run) for the targeted ranks and the
 * scheduler side's lookups and manifests.
 */
export class FaultPlanError extends KvtierError {
  constructor(message: string) {
    super(ERROR_CODES.faultPlan, message);
  }
}

const rankField = z.union([z.literal('*'), z.number().int().min(0)]);
const probability = z.number().min(0).max(1);
const step = z.number().int().min(0);

const loadFail = z
  .object({
    kind: z.literal('load-fail'),
    rank: rankField.default('*'),
    p: probability.default(0),
    blocks: z.array(z.number().int().min(0)).default([]),
    after: step.default(0),
    count: z.number().int().min(1).nullable().default(null),
  })
  .strict()
  .refine((r) => r.p > 0 || r.blocks.length > 0, { message: 'load-fail needs p=... or blocks=...' });

const storeFail = z
  .object({
    kind: z.literal('store-fail'),
    rank: rankField.default('*'),
    p: probability,
    after: step.default(0),
  })
  .strict();

const delay = z
  .object({
    kind: z.literal('delay'),
    rank: rankField.default('*'),
    ms: z.number().min(0).max(60_000),
    after: step.default(0),
  })
  .strict();

const stall = z
  .object({
    kind: z.literal('stall'),
    rank: rankField.default('*'),
    after: step.default(0),
    steps: z.number().int().min(1).nullable().default(null),
  })
  .strict();

const remoteFail = z
  .object({
    kind: z.literal('remote-fail'),
    rank: rankField.default('*'),
    p: probability,
    after: step.default(0),
  })
  .strict();

const remoteDown = z
  .object({
    kind: z.literal('remote-down'),
    rank: rankField.default('*'),
    step,
    steps: z.number().int().min(1).nullable().default(null),
  })
  .strict();

/** When a rank dies: exactly one of these is given. */
const deathMoment = {
  step: step.optional(),
  open: z.number().int().min(1).optional(),
  reset: z.number().int().min(1).optional(),
};

function oneDeathMoment(rule: { step?: number; open?: number; reset?: number }): boolean {
  return [rule.step, rule.open, rule.reset].filter((v) => v !== undefined).length === 1;
}

const deathMomentMessage = { message: 'give exactly one of step=S, open=N or reset=N', path: ['step'] };

const crash = z
  .object({
    kind: z.literal('crash'),
    rank: rankField.default('*'),
    ...deathMoment,
    /** 'throw': an uncaught error in the rank; 'exit': the rank's thread exits. */
    how: z.enum(['throw', 'exit']).default('throw'),
  })
  .strict()
  .refine(oneDeathMoment, deathMomentMessage);

const hang = z
  .object({
    kind: z.literal('hang'),
    rank: rankField.default('*'),
    ...deathMoment,
  })
  .strict()
  .refine(oneDeathMoment, deathMomentMessage);

export const faultRuleSchema = z.discriminatedUnion('kind', [loadFail, storeFail, delay, stall, crash, hang, remoteFail, remoteDown]);
export type FaultRule = z.output<typeof faultRuleSchema>;
export type FaultKind = FaultRule['kind'];

export interface FaultPlan {
  readonly rules: readonly FaultRule[];
  readonly seed: number;
}

const KNOWN_KEYS: Record<FaultKind, readonly string[]> = {
  'load-fail': ['rank', 'p', 'blocks', 'after', 'count'],
  'store-fail': ['rank', 'p', 'after'],
  delay: ['rank', 'ms', 'after'],
  stall: ['rank', 'after', 'steps'],
  crash: ['rank', 'step', 'open', 'reset', 'how'],
  hang: ['rank', 'step', 'open', 'reset'],
  'remote-fail': ['rank', 'p', 'after'],
  'remote-down': ['rank', 'step', 'steps'],
};

function isKind(kind: string): kind is FaultKind {
  return Object.prototype.hasOwnProperty.call(KNOWN_KEYS, kind);
}

/** Plain decimal numbers only: Number() would also read '0x1', '0b1' or '1e0' as 1. */
const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)$/;

function parseNumber(kind: string, key: string, raw: string): number {
  const value = Number(raw);
  if (!DECIMAL.test(raw) || !Number.isFinite(value)) {
    throw new FaultPlanError(`fault plan: ${kind}: ${key}=${raw} is not a number (plain decimal digits)`);
  }
  return value;
}

function parseValue(kind: FaultKind, key: string, raw: string): unknown {
  if (key === 'rank') return raw === '*' ? '*' : parseNumber(kind, key, raw);
  if (key === 'how') return raw;
  if (key === 'blocks') return raw.split('|').map((b) => parseNumber(kind, key, b));
  return parseNumber(kind, key, raw);
}

function parseRule(text: string): FaultRule {
  const colon = text.indexOf(':');
  const kind = (colon < 0 ? text : text.slice(0, colon)).trim();
  if (!isKind(kind)) {
    throw new FaultPlanError(`fault plan: unknown fault kind '${kind}' (known: ${Object.keys(KNOWN_KEYS).join(', ')})`);
  }
  const fields: Record<string, unknown> = { kind };
  const body = colon < 0 ? '' : text.slice(colon + 1).trim();
  for (const pair of body === '' ? [] : body.split(',')) {
    const eq = pair.indexOf('=');
    if (eq < 0) throw new FaultPlanError(`fault plan: ${kind}: '${pair}' is not key=value`);
    const key = pair.slice(0, eq).trim();
    const raw = pair.slice(eq + 1).trim();
    if (!KNOWN_KEYS[kind].includes(key)) {
      throw new FaultPlanError(`fault plan: ${kind}: unknown key '${key}' (known: ${KNOWN_KEYS[kind].join(', ')})`);
    }
    if (key in fields) throw new FaultPlanError(`fault plan: ${kind}: key '${key}' given twice`);
    fields[key] = parseValue(kind, key, raw);
  }
  const parsed = faultRuleSchema.safeParse(fields);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
    throw new FaultPlanError(`fault plan: ${kind}: ${where}${issue.message}`);
  }
  return parsed.data;
}

/** Parses a fault plan string; an empty string is the empty plan. */
export function parseFaultPlan(text: string, seed = 0): FaultPlan {
  const rules = text
    .split(';')
    .map((r) => r.trim())
    .filter((r) => r !== '')
    .map(parseRule);
  checkDeathConflicts(rules);
  return { rules, seed };
}

type DeathRule = Extract<FaultRule, { kind: 'crash' | 'hang' }>;

function deathMomentOf(rule: DeathRule): string {
  if (rule.step !== undefined) return `step=${rule.step}`;
  if (rule.open !== undefined) return `open=${rule.open}`;
  return `reset=${rule.reset}`;
}

/** Two rules that kill the same rank at the same moment contradict each other: which one happens? */
function checkDeathConflicts(rules: readonly FaultRule[]): void {
  const deaths = rules.filter((r): r is DeathRule => r.kind === 'crash' || r.kind === 'hang');
  for (let i = 0; i < deaths.length; i++) {
    for (let j = i + 1; j < deaths.length; j++) {
      const a = deaths[i];
      const b = deaths[j];
      const sameRank = a.rank === '*' || b.rank === '*' || a.rank === b.rank;
      if (!sameRank || deathMomentOf(a) !== deathMomentOf(b)) continue;
      const rank = a.rank === '*' ? b.rank : a.rank;
      throw new FaultPlanError(
        `fault plan: ${a.kind} and ${b.kind} both end rank=${String(rank)} at ${deathMomentOf(a)}; give one rule per rank and moment`,
      );
    }
  }
}

/** Checks the plan's ranks against the engine's tp. */
export function validateFaultPlanRanks(plan: FaultPlan, tp: number): void {
  for (const rule of plan.rules) {
    if (rule.rank !== '*' && rule.rank >= tp) {
      throw new FaultPlanError(`fault plan: ${rule.kind}: rank=${rule.rank} but tp is ${tp}`);
    }
  }
}

/**
 * Checks the GPU block ids a plan lists against the engine's pool, so a bad
 * plan is refused up front instead of failing a rank when its rule activates.
 */
export function validateFaultPlanBlocks(plan: FaultPlan, numGpuBlocks: number): void {
  for (const rule of plan.rules) {
    if (rule.kind !== 'load-fail') continue;
    const outside = rule.blocks.find((b) => b >= numGpuBlocks);
    if (outside !== undefined) {
      throw new FaultPlanError(
        `fault plan: load-fail: blocks=${outside} is not a GPU block (gpuBlocks is ${numGpuBlocks}, ids 0..${numGpuBlocks - 1})`,
      );
    }
  }
}

export function rulesForRank(plan: FaultPlan, rank: number): FaultRule[] {
  return plan.rules.filter((r) => r.rank === '*' || r.rank === rank);
}

/** Renders a plan back to its string form (round-trips through parseFaultPlan). */
export function formatFaultPlan(plan: FaultPlan): string {
  return plan.rules
    .map((rule) => {
      const parts = Object.entries(rule)
        .filter(
          ([key, value]) =>
            key !== 'kind' && value !== null && value !== undefined && !(Array.isArray(value) && value.length === 0),
        )
        .map(([key, value]) => `${key}=${Array.isArray(value) ? value.join('|') : String(value)}`);
      return `${rule.kind}:${parts.join(',')}`;
    })
    .join(';');
}
