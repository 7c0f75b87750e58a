/**
 * A msgpack writer for the few shapes KV event batches use, writing into one
 * reused buffer. It makes the choices @msgpack/msgpack's Encoder makes (with
 * `useBigInt64`): the smallest integer form for safe integers, float 64 for
 * other numbers, fixstr / str 8 / str 16 headers, unsigned 64-bit for block
 * hashes; so its bytes are the library's (test/events/vllm-wire.test.ts
 * compares them). It exists for speed: the events are encoded on the engine's
 * thread once per step, and a general encoder walking objects, keys and
 * BigInts cost several times the scheduler's own step there.
 */
/**
 * Messages are copied out into slabs of this many bytes, each copy a view of
 * its slab: one buffer allocation per slab rather than one per message (a
 * KV event thread copies out a batch of kilobytes every step). A slab is
 * freed once no copy cut from it is kept (the replay buffer drops them in
 * order); a message over a quarter of a slab gets a buffer of its own.
 */
const SLAB_BYTES = 1 << 18;

export class MsgpackWriter {
  private bytes: Uint8Array;
  private view: DataView;
  private pos = 0;
  private slab = new Uint8Array(0);
  private slabUsed = 0;

  constructor(initialBytes = 4096) {
    this.bytes = new Uint8Array(initialBytes);
    this.view = new DataView(this.bytes.buffer);
  }

  /** Starts a new message, reusing the buffer. */
  reset(): void {
    this.pos = 0;
  }

  /** The message written since reset(), as a copy the caller may keep (a view of a slab shared with other messages' copies). */
  take(): Uint8Array {
    const n = this.pos;
    if (n > SLAB_BYTES >> 2) return this.bytes.slice(0, n);
    if (this.slabUsed + n > this.slab.length) {
      this.slab = new Uint8Array(SLAB_BYTES);
      this.slabUsed = 0;
    }
    const at = this.slabUsed;
    const copy = this.slab.subarray(at, at + n);
    copy.set(this.bytes.subarray(0, n));
    this.slabUsed = at + n;
    return copy;
  }

  nil(): void {
    this.room(1);
    this.bytes[this.pos++] = 0xc0;
  }

  arrayHeader(length: number): void {
    this.room(5);
    if (length < 16) this.bytes[this.pos++] = 0x90 | length;
    else if (length < 0x10000) this.u8u16(0xdc, length);
    else this.u8u32(0xdd, length);
  }

  mapHeader(size: number): void {
    this.room(5);
    if (size < 16) this.bytes[this.pos++] = 0x80 | size;
    else if (size < 0x10000) this.u8u16(0xde, size);
    else this.u8u32(0xdf, size);
  }

  /** A number as the library writes it: the smallest integer form for safe integers, float 64 otherwise. */
  number(value: number): void {
    if (!Number.isSafeInteger(value)) {
      this.float64(value);
      return;
    }
    this.room(9);
    const b = this.bytes;
    if (value >= 0) {
      if (value < 0x80) b[this.pos++] = value;
      else if (value < 0x100) {
        b[this.pos++] = 0xcc;
        b[this.pos++] = value;
      } else if (value < 0x10000) this.u8u16(0xcd, value);
      else if (value < 0x100000000) this.u8u32(0xce, value);
      // Beyond 32 bits the library (with useBigInt64) writes a float.
      else this.float64(value);
    } else if (value >= -0x20) b[this.pos++] = 0xe0 | (value + 0x20);
    else if (value >= -0x80) {
      b[this.pos++] = 0xd0;
      this.view.setInt8(this.pos++, value);
    } else if (value >= -0x8000) {
      b[this.pos++] = 0xd1;
      this.view.setInt16(this.pos, value);
      this.pos += 2;
    } else if (value >= -0x80000000) {
      b[this.pos++] = 0xd2;
      this.view.setInt32(this.pos, value);
      this.pos += 4;
    } else this.float64(value);
  }

  /** Every element of `values` with number(); a token list is small integers, written inline. */
  numbers(values: readonly number[]): void {
    const n = values.length;
    this.arrayHeader(n);
    for (let i = 0; i < n; i++) {
      const value = values[i];
      if (value >= 0 && value < 0x80 && Number.isInteger(value)) {
        this.room(1);
        this.bytes[this.pos++] = value;
      } else this.number(value);
    }
  }

  /** Words [from, to) of `values`, read as unsigned, as numbers() writes them: the array header, then each integer. */
  uint32s(values: Int32Array, from: number, to: number): void {
    this.arrayHeader(to - from);
    this.room(to - from);
    for (let i = from; i < to; i++) {
      const value = values[i] >>> 0;
      // room() above covers the one-byte form; number() makes its own.
      if (value >= 0 && value < 0x80) this.bytes[this.pos++] = value;
      else this.number(value);
    }
  }

  float64(value: number): void {
    this.room(9);
    this.bytes[this.pos++] = 0xcb;
    this.view.setFloat64(this.pos, value);
    this.pos += 8;
  }

  /** An unsigned 64-bit integer given as its high and low 32 bits (the library's form for a non-negative BigInt). */
  uint64(high: number, low: number): void {
    this.room(9);
    this.bytes[this.pos++] = 0xcf;
    this.view.setUint32(this.pos, high);
    this.view.setUint32(this.pos + 4, low);
    this.pos += 8;
  }

  /** A string already encoded as UTF-8, header included (see encodeString). */
  raw(encoded: Uint8Array): void {
    const n = encoded.length;
    this.room(n);
    if (n > 64) {
      this.bytes.set(encoded, this.pos);
      this.pos += n;
      return;
    }
    // A loop beats set()'s call for a nil or a short string.
    const b = this.bytes;
    let pos = this.pos;
    for (let i = 0; i < n; i++) b[pos++] = encoded[i];
    this.pos = pos;
  }

  private u8u16(tag: number, value: number): void {
    this.bytes[this.pos++] = tag;
    this.view.setUint16(this.pos, value);
    this.pos += 2;
  }

  private u8u32(tag: number, value: number): void {
    this.bytes[this.pos++] = tag;
    this.view.setUint32(this.pos, value);
    this.pos += 4;
  }

  private room(bytes: number): void {
    if (this.pos + bytes <= this.bytes.length) return;
    const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.pos + bytes));
    grown.set(this.bytes.subarray(0, this.pos));
    this.bytes = grown;
    this.view = new DataView(grown.buffer);
  }
}

/** Byte runs end to end, to write with one raw() (e.g. a key, its value and the next key). */
export function concatBytes(...parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** A string as msgpack writes it (header and UTF-8 bytes), to write again and again with raw(). */
export function encodeString(text: string): Uint8Array {
  const utf8 = Buffer.from(text, 'utf8');
  const n = utf8.length;
  const header = n < 32 ? [0xa0 | n] : n < 0x100 ? [0xd9, n] : n < 0x10000 ? [0xda, n >> 8, n & 0xff] : [0xdb, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
  const out = new Uint8Array(header.length + n);
  out.set(header, 0);
  out.set(utf8, header.length);
  return out;
}
