import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RemoteValueError } from '../../src/remote/errors.js';
import { resolveRemoteSecret } from '../../src/remote/remote-secret.js';
import { AUTH_BYTES, authKeysOf, deriveRemoteAuth, ValueSealer, type RemoteAuthMode } from '../../src/remote/value-auth.js';
import { HEADER_BYTES } from '../../src/remote/value-format.js';

/** Sealing and opening values, and where the secret comes from. */

const SECRET = Buffer.from('sixteen-or-more-bytes');
const NS = Buffer.alloc(32, 7);

function sealer(mode: RemoteAuthMode, secret = SECRET, ns = NS): ValueSealer {
  return new ValueSealer(authKeysOf(deriveRemoteAuth(secret, ns, mode)));
}

/** A value holding `payload`, sealed under `key`. */
function sealed(s: ValueSealer, key: string, payload: Buffer): Buffer {
  const value = Buffer.concat([Buffer.alloc(HEADER_BYTES, 1), Buffer.alloc(AUTH_BYTES), payload]);
  s.seal(key, value, HEADER_BYTES);
  return value;
}

function opened(s: ValueSealer, key: string, value: Buffer): Buffer {
  const at = s.open(key, value, HEADER_BYTES);
  return Buffer.from(at.bytes.subarray(at.offset));
}

function authFault(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return error instanceof RemoteValueError ? error.fault : String(error);
  }
  return 'none';
}

const PAYLOAD = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7) & 0xff));

describe.each(['mac', 'encrypt'] as const)('a value sealed with %s', (mode) => {
  it('opens to its payload under the same key and secret', () => {
    expect(opened(sealer(mode), 'k', sealed(sealer(mode), 'k', PAYLOAD)).equals(PAYLOAD)).toBe(true);
  });

  it('is refused under another key, another secret, another namespace, or with any byte changed', () => {
    const value = sealed(sealer(mode), 'k', PAYLOAD);
    expect(authFault(() => sealer(mode).open('k2', value, HEADER_BYTES))).toBe('auth');
    expect(authFault(() => sealer(mode, Buffer.from('another-secret-of-bytes')).open('k', value, HEADER_BYTES))).toBe('auth');
    expect(authFault(() => sealer(mode, SECRET, Buffer.alloc(32, 8)).open('k', value, HEADER_BYTES))).toBe('auth');
    for (const at of [3, HEADER_BYTES + 1, HEADER_BYTES + AUTH_BYTES + 100]) {
      const changed = Buffer.from(value);
      changed[at] ^= 1;
      expect(authFault(() => sealer(mode).open('k', changed, HEADER_BYTES))).toBe('auth');
    }
  });
});

describe('encryption', () => {
  it('leaves no payload byte in place beyond chance', () => {
    const value = sealed(sealer('encrypt'), 'k', PAYLOAD);
    const stored = value.subarray(HEADER_BYTES + AUTH_BYTES);
    let same = 0;
    for (let i = 0; i < PAYLOAD.length; i++) if (stored[i] === PAYLOAD[i]) same++;
    // Chance alone leaves about 1 in 256 in place.
    expect(same).toBeLessThan(PAYLOAD.length / 32);
  });

  it('seals the same payload twice into different bytes (a fresh nonce each time)', () => {
    const s = sealer('encrypt');
    expect(sealed(s, 'k', PAYLOAD).equals(sealed(s, 'k', PAYLOAD))).toBe(false);
  });
});

describe('the remote secret', () => {
  const file = (text: string): string => {
    const path = join(mkdtempSync(join(tmpdir(), 'kvtier-secret-')), 'secret');
    writeFileSync(path, text);
    return path;
  };

  it('comes from the key, else the file (one trailing newline dropped), else the environment, else is none', () => {
    expect(resolveRemoteSecret({ remoteSecret: 'sixteen-or-more-bytes' }, {})?.toString()).toBe('sixteen-or-more-bytes');
    expect(resolveRemoteSecret({ remoteSecretFile: file('sixteen-or-more-bytes\n') }, {})?.toString()).toBe('sixteen-or-more-bytes');
    expect(resolveRemoteSecret({}, { KVTIER_REMOTE_SECRET: 'from-the-environment' })?.toString()).toBe('from-the-environment');
    expect(resolveRemoteSecret({}, {})).toBeNull();
  });

  it('is refused when short, unreadable or given twice, naming where it came from and never the secret', () => {
    expect(() => resolveRemoteSecret({ remoteSecret: 'short-one' }, {})).toThrow('remoteSecret: the remote secret has 9 bytes; give at least 16');
    expect(() => resolveRemoteSecret({}, { KVTIER_REMOTE_SECRET: 'short-one' })).toThrow(/^KVTIER_REMOTE_SECRET: the remote secret has 9 bytes/);
    expect(() => resolveRemoteSecret({ remoteSecretFile: '/nonexistent/secret' }, {})).toThrow("remoteSecretFile: cannot read '/nonexistent/secret' (ENOENT)");
    expect(() => resolveRemoteSecret({ remoteSecret: 'sixteen-or-more-bytes', remoteSecretFile: file('x') }, {})).toThrow(/give one of them/);
    try {
      resolveRemoteSecret({ remoteSecret: 'short-one' }, {});
    } catch (error) {
      expect(String(error)).not.toContain('short-one');
    }
  });
});
