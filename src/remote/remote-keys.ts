import { createHash, createHmac } from 'node:crypto';
import type { KvGeometry } from '../core/kv-geometry.js';
import { RemoteConfigError } from './errors.js';
import { deriveRemoteAuth, type RemoteAuth, type RemoteAuthMode } from './value-auth.js';

/**
 * Remote keys (docs/architecture.md, "Remote tier"). The local 64-bit block
 * hashes are fine inside one process but not across tenants: a crafted prompt
 * could collide with someone else's prefix. Remote keys come from a SHA-256
 * chain instead, seeded with everything that makes KV bytes differ:
 *
 *   ns      = SHA-256("kvtier-remote/3", namespace, model shape, layout, blockSize, offloadFactor, tp)
 *   d(-1)   = SHA-256(ns, cacheSalt), or with a secret HMAC-SHA-256(chain key, ns, cacheSalt)
 *   d(i)    = SHA-256(d(i-1), tokens of offloaded block i)
 *
 * A block's shards and its manifest carry the digest in a hash tag
 * (`{...}`), so in a cluster they share one slot.
 */

/** 2: payload checksums are CRC-32C (were CRC-32). 3: header flags and the MAC section (value-auth.ts). */
export const REMOTE_FORMAT_VERSION = 3;

/** What two engines must agree on to share remote blocks. */
export interface RemoteNamespaceInput extends Pick<KvGeometry, 'model' | 'layout' | 'blockSize' | 'offloadFactor' | 'tp'> {
  /** Operator-chosen name; defaults to the model's name. */
  readonly namespace: string;
}

export interface RemoteNamespace {
  readonly name: string;
  /** SHA-256 of the namespace input (32 bytes). */
  readonly digest: Buffer;
  /** Tokens per offloaded block: the unit the chain and the remote values cover. */
  readonly blockTokens: number;
  readonly tp: number;
  /** Keys derived from the secret (value-auth.ts); null or absent: values carry only a CRC. */
  readonly auth?: RemoteAuth | null;
}

const NAMESPACE_PATTERN = /^[A-Za-z0-9._/-]{1,100}$/;

/** Checks a namespace name: it is part of every key, so no braces (hash tags) or spaces. */
export function checkNamespaceName(name: string, field = 'remoteNamespace'): string {
  if (typeof name !== 'string' || !NAMESPACE_PATTERN.test(name)) {
    throw new RemoteConfigError(field, `'${String(name)}' must be 1-100 characters of A-Z a-z 0-9 . _ / -`);
  }
  return name;
}

/** The namespace; with a secret, values are authenticated (and encrypted under 'encrypt') with keys derived for it. */
export function remoteNamespace(input: RemoteNamespaceInput, secret: Buffer | null = null, mode: RemoteAuthMode = 'mac'): RemoteNamespace {
  const name = checkNamespaceName(input.namespace);
  const digest = createHash('sha256')
    .update(`kvtier-remote/${REMOTE_FORMAT_VERSION}\0`)
    .update(JSON.stringify({
      namespace: name,
      model: input.model,
      layout: input.layout,
      blockSize: input.blockSize,
      offloadFactor: input.offloadFactor,
      tp: input.tp,
    }))
    .digest();
  const auth = secret === null ? null : deriveRemoteAuth(secret, digest, mode);
  return { name, digest, blockTokens: input.blockSize * input.offloadFactor, tp: input.tp, auth };
}

/**
 * The chain's seed for one request: the namespace and the request's cache
 * salt (an empty salt is no salt, as in the local block hashes). With a
 * secret it is keyed, so no one without the secret can name a prompt's blocks.
 */
export function chainSeed(ns: RemoteNamespace, cacheSalt: string | null): Buffer {
  const h = ns.auth ? createHmac('sha256', ns.auth.chainKey) : createHash('sha256');
  h.update(ns.digest);
  // A distinct marker for "no salt", so no salt string can equal it.
  if (cacheSalt === null || cacheSalt === '') h.update(Buffer.from([0]));
  else h.update(Buffer.from([1])).update(cacheSalt, 'utf8');
  return h.digest();
}

/**
 * Extends `chain` (digests of offloaded blocks 0..chain.length-1) to cover
 * every full offloaded block of the first `numTokens` tokens. Tokens are hashed as 32-bit little-endian integers.
 */
export function extendChain(
  ns: RemoteNamespace,
  seed: Buffer,
  chain: Buffer[],
  tokenAt: (position: number) => number,
  numTokens: number,
): void {
  const per = ns.blockTokens;
  const full = Math.floor(numTokens / per);
  if (chain.length >= full) return;
  const bytes = Buffer.allocUnsafe(per * 4);
  for (let i = chain.length; i < full; i++) {
    const base = i * per;
    for (let t = 0; t < per; t++) bytes.writeInt32LE(tokenAt(base + t), t * 4);
    const parent = i === 0 ? seed : chain[i - 1];
    chain.push(createHash('sha256').update(parent).update(bytes).digest());
  }
}

/** Key of rank `rank`'s shard of a block. */
export function shardKey(ns: RemoteNamespace, digestHex: string, rank: number): string {
  return `kvt:${ns.name}:{${digestHex}}:r${rank}of${ns.tp}`;
}

/** Key of a block's manifest: present only once every rank's shard was written. */
export function manifestKey(ns: RemoteNamespace, digestHex: string): string {
  return `kvt:${ns.name}:{${digestHex}}:m`;
}
