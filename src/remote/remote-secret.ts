import { readFileSync } from 'node:fs';
import { RemoteConfigError } from './errors.js';

/** The environment variable a remote secret may come from. */
export const REMOTE_SECRET_ENV = 'KVTIER_REMOTE_SECRET';

/** Shorter secrets are refused: the keys derived from them must not be guessable. */
export const MIN_SECRET_BYTES = 16;

export interface RemoteSecretInput {
  readonly remoteSecret?: string;
  readonly remoteSecretFile?: string;
}

/**
 * The remote secret: the `remoteSecret` key, else the file `remoteSecretFile`
 * names, else the environment's KVTIER_REMOTE_SECRET; null when none is set.
 * Errors name where it came from, never the secret.
 */
export function resolveRemoteSecret(input: RemoteSecretInput, env: NodeJS.ProcessEnv = process.env): Buffer | null {
  if (input.remoteSecret !== undefined && input.remoteSecretFile !== undefined) {
    throw new RemoteConfigError('remoteSecretFile', 'remoteSecret is given too: give one of them, not both');
  }
  if (input.remoteSecret !== undefined) return checkRemoteSecret(Buffer.from(input.remoteSecret, 'utf8'), 'remoteSecret');
  if (input.remoteSecretFile !== undefined) return checkRemoteSecret(readSecretFile(input.remoteSecretFile), `remoteSecretFile '${input.remoteSecretFile}'`);
  const fromEnv = env[REMOTE_SECRET_ENV];
  if (fromEnv !== undefined && fromEnv !== '') return checkRemoteSecret(Buffer.from(fromEnv, 'utf8'), REMOTE_SECRET_ENV);
  return null;
}

/** A secret file's bytes, without one trailing newline (as editors and `echo` leave it). */
export function readSecretFile(path: string, field = 'remoteSecretFile'): Buffer {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new RemoteConfigError(field, `cannot read '${path}' (${code})`);
  }
  let end = bytes.length;
  if (end > 0 && bytes[end - 1] === 0x0a) end--;
  if (end > 0 && bytes[end - 1] === 0x0d) end--;
  return bytes.subarray(0, end);
}

/** The secret, if long enough; the error names where it came from. */
export function checkRemoteSecret(secret: Buffer, where: string): Buffer {
  if (secret.length < MIN_SECRET_BYTES) {
    throw new RemoteConfigError(where, `the remote secret has ${secret.length} bytes; give at least ${MIN_SECRET_BYTES} (e.g. openssl rand -hex 32)`);
  }
  return secret;
}
