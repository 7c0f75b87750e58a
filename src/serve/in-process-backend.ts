import type { Registry } from 'prom-client';
import type { CompletionBackend, CompletionSpec, CompletionStream } from './completion-backend.js';
import type { ServingEngine } from './serving-engine.js';

/**
 * The HTTP layer's backend on the engine's own thread: a completion is a
 * ServingEngine stream, its tokens reach the response's writer inside the
 * serving loop's delivery. What embedders and `kvtier serve --http-thread
 * off` use.
 */
export class InProcessBackend implements CompletionBackend {
  constructor(
    private readonly serving: ServingEngine,
    /** The engine's registry, with the serving gauges on it. */
    private readonly registry: Registry,
  ) {}

  async submit(spec: CompletionSpec, signal: AbortSignal): Promise<CompletionStream> {
    return this.serving.stream(spec, { signal });
  }

  get accepting(): boolean {
    return this.serving.accepting;
  }

  metricsText(): Promise<string> {
    return this.registry.metrics();
  }
}
