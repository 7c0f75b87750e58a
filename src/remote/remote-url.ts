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
    throw new RemoteConfigError(field, `expected a redis:// or rediss:// URL, got ${url === '' ? 'an empty string' : typeof url}`);
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RemoteConfigError(field, `'${maskRemoteUrl(url)}' is not a URL (expected redis://[user:password@]host:port or rediss://...; percent-encode / ? # in a password, e.g. %2F)`);
  }
  const masked = maskRemoteUrl(url);
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new RemoteConfigError(field, `'${masked}' has scheme '${parsed.protocol.replace(/:$/, '')}', expected redis or rediss`);
  }
  if (parsed.hostname === '') throw new RemoteConfigError(field, `'${masked}' names no host`);
  if (parsed.search !== '' || parsed.hash !== '') {
    // Nothing after the path is read: a password given as ?password= would be silently ignored.
    throw new RemoteConfigError(field, `'${masked}' has a ${parsed.search !== '' ? "query ('?...')" : "fragment ('#...')"}, which is not read; give the password as redis://user:password@host:port`);
  }
  const port = parsed.port === '' ? DEFAULT_PORT : Number(parsed.port);
  const path = parsed.pathname.replace(/^\//, '');
  let db = 0;
  if (path !== '') {
    if (!/^[0-9]{1,2}$/.test(path)) throw new RemoteConfigError(field, `'${masked}': database '${path}' must be a number 0..99`);
    db = Number(path);
  }
  return {
    host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'),
    port,
    tls: parsed.protocol === 'rediss:',
    username: decodePart(parsed.username, 'user name', field, masked),
    password: decodePart(parsed.password, 'password', field, masked),
    db,
    masked,
  };
}

/** A percent-encoded user name or password, decoded; a stray % is an error naming the part (never showing it). */
function decodePart(encoded: string, part: string, field: string, masked: string): string | undefined {
  if (encoded === '') return undefined;
  try {
    return decodeURIComponent(encoded);
  } catch {
    throw new RemoteConfigError(field, `'${masked}': the ${part} has a % not followed by two hex digits; write a literal % as %25`);
  }
}

/**
 * The URL with any password replaced by `***`. Works on strings that do not
 * parse as URLs too, so an error about a malformed URL never shows a secret:
 * the user information runs to the last `@` (a password may hold `/`, `@`,
 * `?` or `#`), and a `password=` (or `pass=`, `pwd=`) query value is masked.
 */
export function maskRemoteUrl(url: string): string {
  let out = url;
  const scheme = /^([a-z][a-z0-9+.-]*:\/\/)/i.exec(url);
  const start = scheme === null ? 0 : scheme[1].length;
  const at = url.lastIndexOf('@');
  if (at >= start) {
    const auth = url.slice(start, at);
    const colon = auth.indexOf(':');
    if (colon >= 0) out = `${url.slice(0, start)}${auth.slice(0, colon)}:***${url.slice(at)}`;
  }
  return out.replace(/([?&;](?:password|pass|pwd|requirepass)=)[^&#;]*/gi, '$1***');
}
