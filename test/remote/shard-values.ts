import { crc32c } from '../../src/core/crc32c.js';
import type { RemoteNamespace } from '../../src/remote/remote-keys.js';
import { checkShardHeader, checksumMismatch, HEADER_BYTES, writeShardHeader, type ShardIdentity } from '../../src/remote/value-format.js';

/**
 * Whole shard values built and read in JavaScript, from the same header
 * code the ranks use (a rank fills and checks the payload in the addon's
 * checksummed copies instead).
 */

/** A shard value: header and payload in one buffer. */
export function encodeShard(ns: RemoteNamespace, id: ShardIdentity, payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  out.set(payload, HEADER_BYTES);
  writeShardHeader(out, ns, id, payload.length, crc32c(payload));
  return out;
}

/** The payload of a shard value (a view into it), checked as a rank checks it; throws a RemoteValueError naming the first field that does not match. */
export function decodeShard(ns: RemoteNamespace, id: ShardIdentity, expectedLength: number, value: Buffer): Buffer {
  const checksum = checkShardHeader(ns, id, expectedLength, value);
  const payload = value.subarray(HEADER_BYTES);
  if (crc32c(payload) !== checksum) throw checksumMismatch();
  return payload;
}
