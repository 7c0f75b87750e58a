import type { CompletionServer } from './http-server.js';
import type { HttpFrontEnd } from './http-front-end.js';
import type { DrainOutcome, ServingEngine } from './serving-engine.js';

/** The HTTP server on the engine's own thread (`--http-thread off`, and embedders). */
export class InProcessFrontEnd implements HttpFrontEnd {
  /** Nothing of its own can fail apart from the engine. */
  readonly failed: Promise<Error> = new Promise<Error>(() => {});

  constructor(
    readonly server: CompletionServer,
    private readonly serving: ServingEngine,
  ) {}

  get url(): string {
    return this.server.url;
  }

  get port(): number {
    return this.server.port;
  }

  async drain(deadlineMs: number): Promise<DrainOutcome> {
    this.server.stopAccepting();
    const outcome = await this.serving.drain(deadlineMs);
    await this.server.closeAfterResponses();
    return outcome;
  }

  close(): Promise<void> {
    return this.server.close();
  }
}
