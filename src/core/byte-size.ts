/**
 * Byte sizes written for people: "512MiB", "2GiB", "1.5GB", "4096".
 * KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB powers of 1024; no unit
 * (or "B") means bytes. Returns null when the text is not such a size.
 */
const UNIT_BYTES: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

export function parseByteSize(text: string): number | null {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  if (match === null) return null;
  const unit = match[2].toLowerCase() || 'b';
  const multiplier = UNIT_BYTES[unit];
  if (multiplier === undefined) return null;
  return Math.floor(Number(match[1]) * multiplier);
}

/** "1.50 GiB"-style rendering for reports. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(2)} ${units[unit]}`;
}

/** "34.2 GB"-style rendering in powers of 1000, for byte counts shown beside GB/s rates (1e9 bytes a second). */
export function formatDecimalBytes(bytes: number): string {
  const [divisor, unit] = bytes >= 1e9 ? [1e9, 'GB'] : bytes >= 1e6 ? [1e6, 'MB'] : bytes >= 1e3 ? [1e3, 'kB'] : [1, 'B'];
  return divisor === 1 ? `${bytes} B` : `${(bytes / divisor).toFixed(1)} ${unit}`;
}

/** A transfer rate given in GB/s (1e9 bytes), shown in MB/s below 1 GB/s so small rates stay readable. */
export function formatRate(gbps: number | null): string {
  if (gbps === null) return '-';
  return gbps >= 1 ? `${gbps.toFixed(2)} GB/s` : `${(gbps * 1000).toFixed(1)} MB/s`;
}
