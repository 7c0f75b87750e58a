import type { ServerResponse } from 'node:http';
import type { CompletionOutcome } from './completion-backend.js';
import { chunkEventHead, chunkEventRest, chunkPrefix, DONE_EVENT, openAiFinishReason, usageEvent, type CompletionHeader } from './completion-response.js';
import type { TokenSink } from './request-stream.js';
import type { IncrementalDecoder } from './text-codec.js';

/**
 * The server-sent events of one streamed completion, fed synchronously by
 * the serving loop (a TokenSink), with no promise or closure per token: at
 * most one socket write per step, the event's constant JSON rendered once
 * per request; per event only its text, token id list and string are made.
 *
 * On an HTTP/1.1 response whose socket is its own (not queued behind a
 * pipelined one), an event goes to the socket as one pre-framed chunk
 * (`<hex length>\r\n<event>\r\n`, what ServerResponse.write would frame):
 * one write call, where ServerResponse.write corks the socket, defers the
 * uncork to the next tick and hands four buffers to writev. Anywhere else
 * (HTTP/1.0, no socket yet) it goes through ServerResponse.write.
 */
export class SseWriter implements TokenSink {
  private readonly head: string;
  private readonly headBytes: number;
  private readonly prefix: string;
  private ids: number[] = [];

  constructor(
    private readonly response: ServerResponse,
    header: CompletionHeader,
    private readonly decoder: IncrementalDecoder | null,
    /** Fewest tokens per event: one goes out once this many are held, with all of them (the last may carry fewer). */
    private readonly interval: number,
    /** stream_options.include_usage: every chunk carries "usage":null. */
    private readonly usageNull: boolean,
  ) {
    this.prefix = chunkPrefix(header);
    this.head = chunkEventHead(this.prefix);
    this.headBytes = Buffer.byteLength(this.head);
    // Nagle's algorithm would hold an event back until the previous one is acknowledged.
    response.socket?.setNoDelay(true);
  }

  onTokens(tokens: readonly number[]): void {
    for (const token of tokens) this.ids.push(token);
    if (this.ids.length < this.interval || this.response.destroyed) return;
    const text = this.decoder === null ? '' : this.decoder.push(this.ids);
    this.write(chunkEventRest(text, this.ids, null, this.usageNull));
    this.ids = [];
  }

  /** The last events: the tokens held back, the finish reason, with include_usage the usage, and [DONE]. */
  tail(finished: CompletionOutcome, includeUsage: boolean): string {
    const text = this.decoder === null ? '' : this.decoder.push(this.ids) + this.decoder.flush();
    let tail = this.head + chunkEventRest(text, this.ids, openAiFinishReason(finished), this.usageNull);
    if (includeUsage) tail += usageEvent(this.prefix, finished);
    this.ids = [];
    return tail + DONE_EVENT;
  }

  /** Writes one event: the constant head, then `rest` (from the text on). */
  private write(rest: string): void {
    const response = this.response;
    const socket = response.socket;
    if (socket === null || !response.chunkedEncoding || response.writableLength !== socket.writableLength) {
      response.write(this.head + rest);
      return;
    }
    const bytes = this.headBytes + utf8Length(rest);
    socket.write(`${bytes.toString(16)}\r\n${this.head}${rest}\r\n`);
  }
}

/**
 * UTF-8 bytes of a string with no lone surrogates (JSON.stringify escapes
 * them): counted here, as the event's rest is short and Buffer.byteLength
 * is a call into C++ per event.
 */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) continue;
    if (code < 0x800) bytes += 1;
    else if (code >= 0xd800 && code <= 0xdbff) {
      // A surrogate pair: two UTF-16 units, four bytes.
      bytes += 2;
      i++;
    } else bytes += 2;
  }
  return bytes;
}

