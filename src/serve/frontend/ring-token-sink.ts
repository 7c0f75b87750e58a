import type { TokenSink } from '../request-stream.js';
import type { RingWriter } from './token-ring.js';

/** A request's tokens into the token ring, as its serving loop delivers them (one record per request per step). */
export class RingTokenSink implements TokenSink {
  constructor(
    private readonly writer: RingWriter,
    private readonly slot: number,
  ) {}

  onTokens(tokens: readonly number[]): void {
    this.writer.writeTokens(this.slot, tokens);
  }
}
