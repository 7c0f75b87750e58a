import type { DrainOutcome } from './serving-engine.js';

/** The HTTP server in front of a serving engine, wherever it runs (this thread or a front-end thread). */
export interface HttpFrontEnd {
  /** http://host:port of the listener. */
  readonly url: string;
  readonly port: number;
  /**
   * Graceful stop: new completions and /health get 503 at once; those in
   * flight finish within `deadlineMs` or are aborted; their responses are
   * written out, then the listener closes.
   */
  drain(deadlineMs: number): Promise<DrainOutcome>;
  /** Closes the listener and every connection at once. */
  close(): Promise<void>;
  /** Settles with the error when the front end can serve no more (its thread died); pending otherwise. */
  readonly failed: Promise<Error>;
}
