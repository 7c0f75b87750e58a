import type { Logger } from 'pino';
import { createLogger } from '../log/create-logger.js';
import type { Engine, EngineOptions } from '../runtime/engine.js';
import { createMetricsRegistry } from '../prometheus/metrics-registry.js';
import { MetricsServer } from './metrics-server.js';
import type { RunMonitoringConfig } from './run-monitoring-config.js';

/**
 * The monitoring side of one `kvtier run`: the logger the engine writes to
 * and, with --metrics-port, the /metrics endpoint, up from before the first
 * engine starts until the run (and the linger after it) ended.
 */
export class RunMonitor {
  private constructor(
    readonly logger: Logger,
    private readonly server: MetricsServer | null,
    private readonly config: RunMonitoringConfig,
  ) {}

  /** Opens the endpoint (a taken port fails here, before any work) and says where it is on stderr. */
  static async start(config: RunMonitoringConfig): Promise<RunMonitor> {
    const logger = createLogger({ level: config.logLevel, format: config.logFormat });
    let server: MetricsServer | null = null;
    if (config.metricsPort !== null) {
      server = await MetricsServer.listen(config.metricsHost, config.metricsPort);
      process.stderr.write(`kvtier: serving metrics at ${server.url}\n`);
    }
    return new RunMonitor(logger, server, config);
  }

  /** What Engine.create needs to log to this run's logger. */
  engineOptions(): Pick<EngineOptions, 'logger' | 'slowStepMs'> {
    return { logger: this.logger, slowStepMs: this.config.slowStepMs };
  }

  /** /metrics shows this engine from now on. */
  attach(engine: Engine): void {
    this.server?.serve(createMetricsRegistry(engine));
  }

  /** Keeps /metrics up for --metrics-linger-ms after the run, or until SIGINT/SIGTERM. */
  async linger(): Promise<void> {
    const ms = this.config.metricsLingerMs;
    if (this.server === null || ms <= 0) return;
    process.stderr.write(`kvtier: run ended; serving metrics at ${this.server.url} for ${ms} ms more\n`);
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        process.off('SIGINT', done);
        process.off('SIGTERM', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      process.once('SIGINT', done);
      process.once('SIGTERM', done);
    });
  }

  async close(): Promise<void> {
    await this.server?.close();
  }
}
