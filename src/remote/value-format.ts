import { RemoteValueError } from './errors.js';
import { REMOTE_FORMAT_VERSION, type RemoteNamespace } from './remote-keys.js';
import { AUTH_BYTES } from './value-auth.js';

/**
 * A remote value: a fixed header, then the payload (one rank's shard of one
 * offloaded block, or nothing for a manifest).
 *
 *   offset size
 *   0      4   magic "KVTR"
 *   4      2   format version
 *   6      2   tp
 *   8      2   rank (0xffff for a manifest)
 *   10     2   flags: 0 plain, 1 HMAC-SHA-256, 2 AES-256-GCM (value-auth.ts)
 *   12     16  namespace digest (first 16 bytes)
 *   28     32  block digest
 *   60     4   payload length
 *   64     4   CRC-32C of the payload (the plaintext, when encrypted)
 *   68     -   payload; with flags 1 or 2, 32 bytes of MAC (or nonce and
 *              tag) first, then the payload
 *
 * A reader checks every field against what it asked for, so a value written
 * under another namespace, block, rank or tp, a truncated value, or one whose
 * bytes were changed by accident, is refused rather than loaded. Only the MAC
 * (with a secret) stops a writer who changes bytes on purpose. A rank fills a shard's
 * payload straight from its CPU block, checksumming as it copies
 * (Device.readCpuBlockInto), and checks one while copying it into the block
 * (Device.writeCpuBlockFrom): the header is written and checked here, the
 * checksum compared by the caller.
 */

const MAGIC = 0x4b565452; // "KVTR"
export const HEADER_BYTES = 68;
const MANIFEST_RANK = 0xffff;

export interface ShardIdentity {
  readonly digest: Buffer;
  readonly rank: number;
}

/**
 * Writes a shard's header into out[0, HEADER_BYTES), for a payload of
 * `length` bytes with CRC-32C `checksum`, protected as `flags` says.
 */
export function writeShardHeader(out: Buffer, ns: RemoteNamespace, id: ShardIdentity, length: number, checksum: number, flags = 0): void {
  writeHeader(out, ns, id.digest, id.rank, length, checksum, flags);
}

/** Encodes a block's manifest (no payload). */
export function encodeManifest(ns: RemoteNamespace, digest: Buffer): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES);
  writeHeader(out, ns, digest, MANIFEST_RANK, 0, 0, 0);
  return out;
}

/** The error for a payload whose CRC-32C differs from its header's. */
export function checksumMismatch(): RemoteValueError {
  return new RemoteValueError('checksum', 'remote value fails its checksum');
}

/**
 * Checks everything in a shard value but its MAC and its payload's checksum,
 * which it returns: the payload is sound when its CRC-32C equals it. A value
 * must be protected as `flags` says (a plain value is refused where a MAC is
 * expected). Throws a RemoteValueError naming the first field that does not
 * match.
 */
export function checkShardHeader(ns: RemoteNamespace, id: ShardIdentity, expectedLength: number, value: Buffer, flags = 0): number {
  if (value.length < HEADER_BYTES || value.readUInt32BE(0) !== MAGIC) {
    throw new RemoteValueError('format', `remote value of ${value.length} bytes is not a kvtier block`);
  }
  const version = value.readUInt16BE(4);
  if (version !== REMOTE_FORMAT_VERSION) {
    throw new RemoteValueError('version', `remote value has format version ${version}, expected ${REMOTE_FORMAT_VERSION}`);
  }
  if (!value.subarray(12, 28).equals(ns.digest.subarray(0, 16))) {
    throw new RemoteValueError('namespace', 'remote value belongs to another namespace');
  }
  if (!value.subarray(28, 60).equals(id.digest)) {
    throw new RemoteValueError('hash', 'remote value holds another block');
  }
  const tp = value.readUInt16BE(6);
  const rank = value.readUInt16BE(8);
  if (tp !== ns.tp || rank !== id.rank) {
    throw new RemoteValueError('shard', `remote value is shard ${rank} of ${tp}, expected ${id.rank} of ${ns.tp}`);
  }
  const found = value.readUInt16BE(10);
  if (found !== flags) {
    throw new RemoteValueError('auth', `remote value is ${FLAG_NAMES[found] ?? `flagged ${found}`}, expected ${FLAG_NAMES[flags]}`);
  }
  const extra = flags === 0 ? 0 : AUTH_BYTES;
  const length = value.readUInt32BE(60);
  if (length !== expectedLength || value.length !== HEADER_BYTES + extra + length) {
    throw new RemoteValueError(
      'length',
      `remote value holds ${value.length - HEADER_BYTES - extra} payload bytes (header says ${length}), expected ${expectedLength}`,
    );
  }
  return value.readUInt32BE(64);
}

const FLAG_NAMES: Record<number, string> = { 0: 'plain', 1: 'authenticated (HMAC)', 2: 'encrypted (AES-GCM)' };

function writeHeader(out: Buffer, ns: RemoteNamespace, digest: Buffer, rank: number, length: number, checksum: number, flags: number): void {
  out.writeUInt32BE(MAGIC, 0);
  out.writeUInt16BE(REMOTE_FORMAT_VERSION, 4);
  out.writeUInt16BE(ns.tp, 6);
  out.writeUInt16BE(rank, 8);
  out.writeUInt16BE(flags, 10);
  ns.digest.copy(out, 12, 0, 16);
  digest.copy(out, 28, 0, 32);
  out.writeUInt32BE(length, 60);
  out.writeUInt32BE(checksum >>> 0, 64);
}
