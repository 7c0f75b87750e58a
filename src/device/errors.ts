import { KvtierError } from '../core/errors.js';
import { ERROR_CODES } from '../core/error-codes.js';

/**
 * The native device refused a call (bad argument, closed device, unavailable
 * backend) or failed to run it. The message names the call, the argument and
 * the value.
 */
export class DeviceError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ERROR_CODES.device, message, options);
  }
}

/** Wraps whatever the addon threw (a plain Error) into a DeviceError. */
export function toDeviceError(error: unknown): DeviceError {
  if (error instanceof DeviceError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new DeviceError(message, { cause: error });
}
