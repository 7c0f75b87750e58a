import { KvtierError } from '../core/errors.js';

/** A remote tier option is malformed (URL, namespace, timeout); the message names the field. */
export class RemoteConfigError extends KvtierError {
  constructor(message: string) {
    super('ERR_KVTIER_REMOTE_CONFIG', message);
  }
}

/** The remote server could not be reached when the engine started; the message names the masked URL. */
export class RemoteUnavailableError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_KVTIER_REMOTE_UNAVAILABLE', message, options);
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
    super('ERR_KVTIER_REMOTE_VALUE', message);
  }
}
