import OpenAI from 'openai';
import { referenceGenerate } from '../../src/model/reference.js';
import type { EngineConfigInput } from '../../src/runtime/engine-types.js';
import { startServer, type RunningServer, type ServeOptions } from '../../src/serve/serve-app.js';
import { TINY } from '../support/tiny.js';

/** A small engine on the host backend: two ranks, the tiny model, no emulated compute, a CPU tier. */
export const TEST_ENGINE: EngineConfigInput = {
  backend: 'host',
  model: 'tiny',
  tp: 2,
  gpuBlocks: 256,
  cpuBlocks: 512,
  computeNsPerToken: 0,
};

/** A server on an ephemeral loopback port; the caller closes it. */
export async function startTestServer(overrides: Partial<ServeOptions> & { engine?: Partial<EngineConfigInput> } = {}): Promise<RunningServer> {
  const { engine, ...rest } = overrides;
  return startServer({ host: '127.0.0.1', port: 0, ...rest, engine: { ...TEST_ENGINE, ...engine } });
}

/** OpenAI's official client, pointed at the server (it needs some key; the server takes any). */
export function openaiClient(server: RunningServer): OpenAI {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'not-checked', maxRetries: 0 });
}

/** What the reference model generates for these prompt tokens. */
export function referenceOutput(promptTokens: readonly number[], maxTokens: number, seed = 0): number[] {
  return referenceGenerate(TINY, { promptTokens, maxTokens, seed }).outputTokens;
}

/** kvtier's own fields in a completion choice and in usage (the client passes them through). */
export interface KvtierChoice {
  readonly token_ids: number[];
}
export interface KvtierUsage {
  readonly prompt_tokens_details: { readonly cached_tokens: number; readonly cached_tokens_by_tier: { gpu: number; cpu: number; remote: number } };
}

export function tokenIdsOf(choice: unknown): number[] {
  return (choice as KvtierChoice).token_ids;
}

export function cachedOf(usage: unknown): KvtierUsage['prompt_tokens_details'] {
  return (usage as KvtierUsage).prompt_tokens_details;
}

/** A prompt of `length` token ids, distinct per `seed`. */
export function tokenPrompt(length: number, seed: number): number[] {
  return Array.from({ length }, (_, i) => (seed * 7919 + i * 104729) % TINY.vocabSize);
}

/**
 * Resolves once `condition()` holds, checked every few milliseconds; gives
 * up only after minutes, so a slow machine waits longer instead of failing.
 */
export async function until(condition: () => boolean | Promise<boolean>, what: string, maxChecks = 60_000): Promise<void> {
  for (let i = 0; i < maxChecks; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** POSTs a JSON body and returns the status and parsed body. */
export async function postJson(url: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, body: await response.json() };
}
