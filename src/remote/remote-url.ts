import { RemoteConfigError } from './errors.js';

/**
 * A remote tier address: `redis://[user:pass@]host:port[/db]`, or
 * `rediss://...` for TLS. Whether the server is a Redis/Valkey Cluster is
 * found out when connecting, so the same URL form serves both.
 */
export interface RemoteAddress {
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
  readonly username: string | undefined;
  readonly password: string | undefined;
  readonly db: number;
  /** The URL with its password replaced by `***`: the only form ever printed or logged. */
  readonly masked: string;
}

const DEFAULT_PORT = 6379;

/** Parses and checks a remote URL; errors name the field and show the URL masked. */
export function parseRemoteUrl(url: string, field = 'remote'): RemoteAddress {
  if (typeof url !== 'string' || url.length === 0) {
    throw new RemoteConfigError(`${field}: expected a redis:// or rediss:// URL, got ${url === '' ? 'an empty string' : typeof url}`);
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RemoteConfigError(`${field}: '${maskRemoteUrl(url)}' is not a URL (expected redis://host:port or rediss://host:port)`);
  }
  const masked = maskRemoteUrl(url);
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new RemoteConfigError(`${field}: '${masked}' has scheme '${parsed.protocol.replace(/:$/, '')}', expected redis or rediss`);
  }
  if (parsed.hostname === '') throw new RemoteConfigError(`${field}: '${masked}' names no host`);
  const port = parsed.port === '' ? DEFAULT_PORT : Number(parsed.port);
  const path = parsed.pathname.replace(/^\//, '');
  let db = 0;
  if (path !== '') {
    if (!/^[0-9]{1,2}$/.test(path)) throw new RemoteConfigError(`${field}: '${masked}': database '${path}' must be a number 0..99`);
    db = Number(path);
  }
  return {
    host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'),
    port,
    tls: parsed.protocol === 'rediss:',
    username: parsed.username === '' ? undefined : decodeURIComponent(parsed.username),
    password: parsed.password === '' ? undefined : decodeURIComponent(parsed.password),
    db,
    masked,
  };
}

/**
 * The URL with any password replaced by `***`. Works on strings that do not
 * parse as URLs too, so an error about a malformed URL never shows a secret.
 */
export function maskRemoteUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^@/]*)@/i, (_all, scheme: string, auth: string) => {
    const colon = auth.indexOf(':');
    if (colon < 0) return `${scheme}${auth}@`;
    return `${scheme}${auth.slice(0, colon)}:***@`;
  });
}
