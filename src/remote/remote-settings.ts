import { ConfigError } from '../core/errors.js';
import { describeConfigIssue, literalNaming, statedSetting, type ConfigIssue } from '../config/issues.js';
import { RemoteConfigError } from './errors.js';
import type { ModelShape } from '../model/shape.js';
import type { RemotePolicy } from './remote-connector.js';
import { checkNamespaceName } from './remote-keys.js';
import { parseRemoteUrl, type RemoteAddress } from './remote-url.js';
import { REMOTE_SECRET_ENV, resolveRemoteSecret } from './remote-secret.js';
import type { RemoteRetrySettings } from './write-retry.js';

export { DEFAULT_REMOTE_TIMEOUT_MS } from '../config/limits.js';

/** The remote tier's engine settings, checked. */
export interface RemoteTierSettings {
  readonly address: RemoteAddress;
  /** The URL as given (passed to the ranks; printed only as address.masked). */
  readonly url: string;
  readonly policy: RemotePolicy;
  readonly timeoutMs: number;
  /** How failed writes are tried again (write-retry.ts). */
  readonly retry: RemoteRetrySettings;
  readonly namespace: string;
  /** The secret values are authenticated with (never printed); null: values carry only a CRC. */
  readonly secret: Buffer | null;
  /** Values are encrypted too (needs a secret). */
  readonly encrypt: boolean;
}

/** Engine config keys of the remote tier, after the schema checked their types. */
interface RemoteInput {
  readonly remote?: string;
  readonly remotePolicy: RemotePolicy;
  readonly remoteTimeoutMs: number;
  readonly remoteWriteAttempts: number;
  readonly remoteRetryBackoffMs: number;
  readonly remoteNamespace?: string;
  readonly remoteSecret?: string;
  readonly remoteSecretFile?: string;
  readonly remoteEncrypt: boolean;
}

/** Checks the remote keys; errors name the key (and the URL, password masked). */
export function remoteTierSettings(c: RemoteInput, model: ModelShape, offload: boolean, env: NodeJS.ProcessEnv = process.env): RemoteTierSettings | null {
  if (c.remote === undefined) {
    for (const key of ['remoteSecret', 'remoteSecretFile'] as const) {
      if (c[key] !== undefined) refuse(statedSetting(key, 'the remote secret needs a remote tier: give remote too'));
    }
    if (c.remoteEncrypt) refuse(statedSetting('remoteEncrypt', 'needs a remote tier: give remote too'));
    return null;
  }
  try {
    const address = parseRemoteUrl(c.remote, 'remote');
    if (!offload) refuse(statedSetting('remote', 'the remote tier sits behind the CPU tier: give cpuBlocks or cpuBytes, and keep offload on'));
    const namespace = checkNamespaceName(c.remoteNamespace ?? defaultNamespace(model), 'remoteNamespace');
    const secret = resolveRemoteSecret(c, env);
    if (c.remoteEncrypt && secret === null) {
      refuse(statedSetting('remoteEncrypt', `encryption needs a secret: give remoteSecretFile (--remote-secret-file), remoteSecret or ${REMOTE_SECRET_ENV}`));
    }
    const retry = { writeAttempts: c.remoteWriteAttempts, backoffMs: c.remoteRetryBackoffMs };
    return { address, url: c.remote, policy: c.remotePolicy, timeoutMs: c.remoteTimeoutMs, retry, namespace, secret, encrypt: c.remoteEncrypt };
  } catch (error) {
    if (error instanceof RemoteConfigError) refuse(error.issue);
    throw error;
  }
}

/** An engine config error worded as every other one (config/issues.ts). */
function refuse(issue: ConfigIssue): never {
  throw new ConfigError(`invalid engine config: ${describeConfigIssue(issue, literalNaming)}`);
}

/** The model's name, with characters a key cannot hold replaced. */
export function defaultNamespace(model: ModelShape): string {
  return model.name.replace(/[^A-Za-z0-9._/-]/g, '-').slice(0, 100) || 'model';
}
