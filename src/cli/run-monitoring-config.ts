import { z } from 'zod';
import { UsageError } from './usage-error.js';
import { originOf, type LayeredInput } from './config-input.js';
import { nonEmptyString, nonNegativeInt, oneOf, positiveNumber } from './field-schemas.js';

/**
 * `kvtier run`'s monitoring settings: the /metrics endpoint and the logs.
 * Flags and config-file keys alike; the fields join runInputSchema.
 */

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ['pretty', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const MONITORING_DEFAULTS = {
  metricsHost: '127.0.0.1',
  logLevel: 'warn' as LogLevel,
  logFormat: 'pretty' as LogFormat,
  metricsLingerMs: 0,
} as const;

/** A TCP port number; 0 lets the system pick a free one (also `kvtier serve --port`). */
export const port = () => {
  const expected = 'expected a port number from 0 to 65535';
  return z.preprocess(
    (value) => (typeof value === 'string' && /^\s*\d+\s*$/.test(value) ? Number(value) : value),
    z.number({ error: expected }).int({ error: expected }).min(0, { error: expected }).max(65535, { error: expected }),
  );
};

/** Schema fields of the monitoring settings, spread into runInputSchema. */
export const monitoringInputFields = {
  metricsPort: port(),
  metricsHost: nonEmptyString('a host name or IP address to listen on'),
  metricsLingerMs: nonNegativeInt(3_600_000),
  logLevel: oneOf(LOG_LEVELS),
  logFormat: oneOf(LOG_FORMATS),
  slowStepMs: positiveNumber(),
};

export interface RunMonitoringConfig {
  /** Port of the /metrics endpoint (0: any free port); null: no endpoint. */
  readonly metricsPort: number | null;
  readonly metricsHost: string;
  /** How long /metrics stays up after the run ended (a signal ends the wait early). */
  readonly metricsLingerMs: number;
  readonly logLevel: LogLevel;
  readonly logFormat: LogFormat;
  /** Steps slower than this (ms) are logged as warnings; null: none are. */
  readonly slowStepMs: number | null;
}

interface MonitoringInput {
  readonly metricsPort?: number;
  readonly metricsHost?: string;
  readonly metricsLingerMs?: number;
  readonly logLevel?: LogLevel;
  readonly logFormat?: LogFormat;
  readonly slowStepMs?: number;
}

/** The settings from validated input, with defaults; endpoint settings without a port are an error naming them. */
export function monitoringConfig(given: MonitoringInput, input: LayeredInput): RunMonitoringConfig {
  if (given.metricsPort === undefined) {
    for (const key of ['metricsHost', 'metricsLingerMs'] as const) {
      if (given[key] !== undefined) throw new UsageError(`${originOf(input, key)} applies to the metrics endpoint only (add --metrics-port PORT)`);
    }
  }
  return {
    metricsPort: given.metricsPort ?? null,
    metricsHost: given.metricsHost ?? MONITORING_DEFAULTS.metricsHost,
    metricsLingerMs: given.metricsLingerMs ?? MONITORING_DEFAULTS.metricsLingerMs,
    logLevel: given.logLevel ?? MONITORING_DEFAULTS.logLevel,
    logFormat: given.logFormat ?? MONITORING_DEFAULTS.logFormat,
    slowStepMs: given.slowStepMs ?? null,
  };
}
