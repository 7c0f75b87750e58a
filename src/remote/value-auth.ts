import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomFillSync, timingSafeEqual } from 'node:crypto';
import type { RemoteAuthKeys } from '../protocol/remote-jobs.js';
import { RemoteValueError } from './errors.js';

/**
 * Authenticated remote values (docs/architecture.md, "Remote tier"). A
 * CRC-32C has no key: anyone who can write to the server could change a
 * payload and recompute it. With a secret, each namespace gets its own keys
 * (HKDF-SHA-256 of the secret, salted with the namespace digest), and every
 * shard value carries, in a 32-byte section after its header:
 *
 *   mac:     HMAC-SHA-256 over (key length, key, header, payload)
 *   encrypt: AES-256-GCM nonce (12) and tag (16), 4 zero bytes; the payload is
 *            the ciphertext and (key length, key, header) the associated data
 *
 * so a value changed, truncated, written under another key or by someone
 * without the secret fails, and under `encrypt` a reader of the server learns
 * nothing of the KV. The chain that names the blocks is keyed too (see
 * chainSeed), so keys do not reveal which prompts were cached.
 */

export type RemoteAuthMode = RemoteAuthKeys['mode'];

export interface RemoteAuth {
  readonly mode: RemoteAuthMode;
  /** HMAC-SHA-256 key of shard values (mac). */
  readonly macKey: Buffer;
  /** AES-256-GCM key (encrypt), else null. */
  readonly encKey: Buffer | null;
  /** HMAC key of the chain's seed: block digests cannot be computed without the secret. */
  readonly chainKey: Buffer;
}

/** Where a value's plaintext payload lies once opened. */
export interface PayloadAt {
  readonly bytes: Buffer;
  readonly offset: number;
}

/** Bytes between a value's header and its payload. */
export const AUTH_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** Header flag values (offset 10) saying how a value is protected. */
export const VALUE_FLAGS = { none: 0, mac: 1, encrypt: 2 } as const;

export function valueFlags(auth: RemoteAuth | RemoteAuthKeys | null): number {
  return auth === null ? VALUE_FLAGS.none : VALUE_FLAGS[auth.mode];
}

export function authBytes(auth: RemoteAuth | RemoteAuthKeys | null): number {
  return auth === null ? 0 : AUTH_BYTES;
}

/** The namespace's keys, derived from the secret and the namespace digest. */
export function deriveRemoteAuth(secret: Buffer, namespaceDigest: Buffer, mode: RemoteAuthMode): RemoteAuth {
  const derive = (purpose: string) => Buffer.from(hkdfSync('sha256', secret, namespaceDigest, `kvtier-remote ${purpose}`, 32));
  return {
    mode,
    macKey: derive('value mac'),
    encKey: mode === 'encrypt' ? derive('value encryption') : null,
    chainKey: derive('chain'),
  };
}

export function authKeysOf(auth: RemoteAuth): RemoteAuthKeys {
  return { mode: auth.mode, macKeyHex: auth.macKey.toString('hex'), encKeyHex: auth.encKey?.toString('hex') ?? null };
}

/** The rank side's keys, from what crossed the thread boundary. */
export class ValueSealer {
  readonly mode: RemoteAuthMode;
  private readonly macKey: Buffer;
  private readonly encKey: Buffer | null;

  constructor(keys: RemoteAuthKeys) {
    this.mode = keys.mode;
    this.macKey = Buffer.from(keys.macKeyHex, 'hex');
    this.encKey = keys.encKeyHex === null ? null : Buffer.from(keys.encKeyHex, 'hex');
  }

  /**
   * Seals a value laid out as header (`headerBytes`), AUTH_BYTES of room,
   * then the plaintext payload: fills the auth section and, under encrypt,
   * replaces the payload with its ciphertext.
   */
  seal(key: string, value: Buffer, headerBytes: number): void {
    const header = value.subarray(0, headerBytes);
    const auth = value.subarray(headerBytes, headerBytes + AUTH_BYTES);
    const payload = value.subarray(headerBytes + AUTH_BYTES);
    if (this.encKey === null) {
      this.mac(key, header, payload).copy(auth);
      return;
    }
    const nonce = randomFillSync(auth.subarray(0, NONCE_BYTES));
    const cipher = createCipheriv('aes-256-gcm', this.encKey, nonce);
    cipher.setAAD(associatedData(key, header));
    // GCM is a stream cipher: the ciphertext has the payload's length and goes back in its place.
    const head = cipher.update(payload);
    head.copy(payload);
    cipher.final().copy(payload, head.length);
    cipher.getAuthTag().copy(auth, NONCE_BYTES);
    auth.fill(0, NONCE_BYTES + TAG_BYTES);
  }

  /**
   * Where the plaintext payload of a sealed value (its header checked) lies:
   * in place under a MAC, in a buffer of its own once decrypted. Throws
   * RemoteValueError('auth') when the value was not sealed with these keys
   * under this key.
   */
  open(key: string, value: Buffer, headerBytes: number): PayloadAt {
    const header = value.subarray(0, headerBytes);
    const auth = value.subarray(headerBytes, headerBytes + AUTH_BYTES);
    const payload = value.subarray(headerBytes + AUTH_BYTES);
    if (this.encKey === null) {
      if (!timingSafeEqual(this.mac(key, header, payload), auth)) throw authFailure();
      return { bytes: value, offset: headerBytes + AUTH_BYTES };
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.encKey, auth.subarray(0, NONCE_BYTES));
      decipher.setAAD(associatedData(key, header));
      decipher.setAuthTag(auth.subarray(NONCE_BYTES, NONCE_BYTES + TAG_BYTES));
      const head = decipher.update(payload);
      const tail = decipher.final();
      return { bytes: tail.length === 0 ? head : Buffer.concat([head, tail]), offset: 0 };
    } catch {
      throw authFailure();
    }
  }

  private mac(key: string, header: Buffer, payload: Buffer): Buffer {
    return createHmac('sha256', this.macKey).update(associatedData(key, header)).update(payload).digest();
  }
}

/** Key length (so no key and header can be cut differently into the same bytes), key, header. */
function associatedData(key: string, header: Buffer): Buffer {
  const keyBytes = Buffer.from(key, 'utf8');
  const out = Buffer.allocUnsafe(4 + keyBytes.length + header.length);
  out.writeUInt32BE(keyBytes.length, 0);
  keyBytes.copy(out, 4);
  header.copy(out, 4 + keyBytes.length);
  return out;
}

function authFailure(): RemoteValueError {
  return new RemoteValueError('auth', 'remote value fails its authentication (written without this engine\'s secret, changed, or moved from another key)');
}
