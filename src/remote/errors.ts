import { KvtierError } from '../core/errors.js';
import { describeConfigIssue, literalNaming, statedSetting, type ConfigIssue } from '../config/issues.js';
import { ERROR_CODES } from '../core/error-codes.js';

/**
 * A remote tier option is malformed (URL, namespace, secret). `issue` names
 * the setting as the caller named it (`remote`, `--remote`); the problem
 * shows the value itself, a URL with its password masked.
 */
export class RemoteConfigError extends KvtierError {
  readonly issue: ConfigIssue;

  constructor(setting: string, problem: string) {
    const issue = statedSetting(setting, problem);
    super(ERROR_CODES.remoteConfig, describeConfigIssue(issue, literalNaming));
    this.issue = issue;
  }
}

/** The remote server could not be reached when the engine started; the message names the masked URL. */
export class RemoteUnavailableError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ERROR_CODES.remoteUnavailable, message, options);
  }
}

/** Why a remote value was refused: the server answered, but not with the block asked for. */
export type RemoteValueFault = 'format' | 'version' | 'namespace' | 'hash' | 'shard' | 'length' | 'checksum' | 'auth';

/** A remote value failed validation (its header does not match what was asked for, or its checksum). */
export class RemoteValueError extends KvtierError {
  constructor(
    readonly fault: RemoteValueFault,
    message: string,
  ) {
    super(ERROR_CODES.remoteValue, message);
  }
}

/** How a remote operation failed. */
export type RemoteFailureKind = 'miss' | 'timeout' | 'connection' | 'value' | 'dropped' | 'server';

/** One remote command failed; `kind` says how (the rank counts it and serves from its other tiers). */
export class RemoteOperationError extends KvtierError {
  constructor(
    readonly kind: RemoteFailureKind,
    message: string,
  ) {
    super(ERROR_CODES.remoteOperation, message);
  }
}
