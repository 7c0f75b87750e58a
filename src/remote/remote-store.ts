import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'iovalkey';
import { RemoteOperationError, RemoteUnavailableError } from './errors.js';
import type { RemoteAddress } from './remote-url.js';

export { RemoteOperationError, type RemoteFailureKind } from './errors.js';

/**
 * One connection to the remote tier (a Redis/Valkey server or cluster)
 * through iovalkey: binary values, auto-pipelining (commands issued in the
 * same tick go out in one write, per cluster node), cluster slot routing, and
 * reconnection with backoff. Every command is bounded by `timeoutMs`; while
 * the connection is down, commands fail at once instead of queueing, so the
 * engine keeps serving from its GPU and CPU tiers.
 */

export interface RemoteStoreOptions {
  readonly address: RemoteAddress;
  /** Bound on every command (and on connecting). */
  readonly timeoutMs: number;
  /** Connect as a cluster client (found out by `probeRemote`). */
  readonly cluster: boolean;
  /**
   * The caller batches its SETs itself (setNow) on a single server: SETs are
   * then written as they are issued, not auto-pipelined, so a lone large
   * value goes out as it is instead of being copied once more into a batch.
   * Other commands stay auto-pipelined. Default false.
   */
  readonly ownSetBatches?: boolean;
}

export interface RemoteConnectionStats {
  /** Times the connection was lost and a reconnect was scheduled. */
  readonly reconnects: number;
  readonly connected: boolean;
}

/** Backoff between reconnect attempts: 50 ms doubling up to 2 s, forever. */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(50 * 2 ** Math.min(Math.max(attempt - 1, 0), 6), 2000);
}

export class RemoteStore {
  private readonly client: Redis | Cluster;
  private readonly ownSetBatches: boolean;
  private reconnects = 0;
  private lastConnectionError: string | null = null;
  /** Set when the server refused SELECT of the URL's database: the client would go on in database 0. */
  private databaseRefused: string | null = null;
  private closed = false;

  constructor(readonly options: RemoteStoreOptions) {
    const { address, timeoutMs } = options;
    const ownSetBatches = options.ownSetBatches === true && !options.cluster;
    this.ownSetBatches = ownSetBatches;
    const common: RedisOptions = {
      username: address.username,
      password: address.password,
      db: address.db,
      tls: address.tls ? {} : undefined,
      connectTimeout: Math.max(timeoutMs, MIN_CONNECT_TIMEOUT_MS),
      commandTimeout: timeoutMs,
      maxRetriesPerRequest: 0,
      enableAutoPipelining: true,
      autoPipeliningIgnoredCommands: ownSetBatches ? ['set'] : [],
      lazyConnect: true,
    };
    if (options.cluster) {
      const clusterOptions: ClusterOptions = {
        redisOptions: { ...common, db: undefined, lazyConnect: undefined },
        enableAutoPipelining: true,
        enableOfflineQueue: false,
        lazyConnect: true,
        maxRedirections: 4,
        clusterRetryStrategy: (times) => reconnectDelayMs(times),
      };
      this.client = new Cluster([{ host: address.host, port: address.port }], clusterOptions);
    } else {
      this.client = new Redis({
        ...common,
        host: address.host,
        port: address.port,
        enableOfflineQueue: false,
        retryStrategy: (times) => reconnectDelayMs(times),
      });
    }
    // Without a listener the client prints every connection error; the counts say enough. The last one
    // is kept: when the first connection fails, it says why (refused, a certificate that does not verify).
    this.client.on('error', (error: unknown) => {
      this.lastConnectionError = error instanceof Error ? error.message : String(error);
      // The client reports a refused SELECT here and carries on in database 0: tenants kept apart by database would share one.
      if ((error as { command?: { name?: string } }).command?.name === 'select') this.databaseRefused = this.lastConnectionError;
    });
    this.client.on('reconnecting', () => {
      this.reconnects++;
    });
  }

  /** Starts connecting; resolves when connected, rejects after timeoutMs (the client keeps retrying). */
  async connect(): Promise<void> {
    const ready = new Promise<void>((resolve, reject) => {
      if (this.client.status === 'ready') return resolve();
      this.client.once('ready', resolve);
      this.client.connect().catch(reject);
    });
    await withTimeout(ready, Math.max(this.options.timeoutMs, MIN_CONNECT_TIMEOUT_MS), `connecting to ${this.options.address.masked}`);
    const refusal = this.databaseError();
    if (refusal !== null) throw refusal;
  }

  /** Why the server refused the URL's database, or null; the SELECT reply arrives before the connection is ready. */
  databaseError(): RemoteOperationError | null {
    if (this.databaseRefused === null) return null;
    const db = this.options.address.db;
    return new RemoteOperationError('server', `the server refuses database ${db} (${this.databaseRefused}); name a database it has, or start it with more (redis-server --databases N)`);
  }

  /** The last connection error the client reported, or null. */
  get lastError(): string | null {
    return this.lastConnectionError;
  }

  get connected(): boolean {
    return this.client.status === 'ready';
  }

  stats(): RemoteConnectionStats {
    return { reconnects: this.reconnects, connected: this.connected };
  }

  /** The value at `key`, or null when the server holds none. */
  async get(key: string): Promise<Buffer | null> {
    return this.run(() => this.client.getBuffer(key));
  }

  /**
   * The values at `keys`, in order (null where the server holds none): one
   * MGET, so one command and one reply for them all. A cluster has no
   * cross-slot MGET; there each key is a GET of its own, auto-pipelined.
   */
  async getMany(keys: readonly string[]): Promise<(Buffer | null)[]> {
    if (keys.length === 1 || this.options.cluster) return Promise.all(keys.map((key) => this.get(key)));
    return this.run(() => this.client.mgetBuffer(...keys));
  }

  async set(key: string, value: Buffer): Promise<void> {
    await this.run(() => this.client.set(key, value));
  }

  /**
   * SETs written to the connection now, in one write, rather than at the end
   * of the tick as auto-pipelining does: a caller encoding many values sends
   * the first ones while it encodes the next. One promise per entry, in
   * order. A cluster has no multi-slot pipeline; there they go out as
   * separate commands, auto-pipelined per node.
   */
  setNow(entries: readonly (readonly [key: string, value: Buffer])[]): Promise<void>[] {
    const alone = entries.length === 1 && this.ownSetBatches;
    if (this.options.cluster || alone) return entries.map(([key, value]) => this.set(key, value));
    const pipeline = this.client.pipeline();
    for (const [key, value] of entries) pipeline.set(key, value);
    const replies = this.run(() => pipeline.exec());
    return entries.map((_, i) =>
      replies.then((all) => {
        const error = all?.[i]?.[0];
        if (error) throw classify(error);
      }),
    );
  }

  /** Which of `keys` exist, in order; one EXISTS per key, pipelined. */
  async exists(keys: readonly string[]): Promise<boolean[]> {
    return this.run(() => Promise.all(keys.map((key) => this.client.exists(key).then((n) => n > 0))));
  }

  async del(keys: readonly string[]): Promise<void> {
    await this.run(() => Promise.all(keys.map((key) => this.client.del(key))));
  }

  /** Deletes every key matching `pattern` (SCAN, on every primary of a cluster); returns how many. */
  async deleteMatching(pattern: string): Promise<number> {
    const nodes = this.client instanceof Cluster ? this.client.nodes('master') : [this.client];
    let deleted = 0;
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        cursor = next;
        // One key per command: in a cluster the keys of one node may still lie in different slots.
        if (keys.length > 0) deleted += (await Promise.all(keys.map((key) => node.unlink(key)))).reduce((a, b) => a + b, 0);
      } while (cursor !== '0');
    }
    return deleted;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.client.disconnect();
  }

  private async run<T>(operation: () => Promise<T>): Promise<T> {
    if (this.closed) throw new RemoteOperationError('connection', 'remote connection is closed');
    const refusal = this.databaseError();
    if (refusal !== null) throw refusal;
    try {
      return await withTimeout(operation(), this.options.timeoutMs, 'remote command');
    } catch (error) {
      throw classify(error);
    }
  }
}

/**
 * Checks at start that the server answers and whether it is a cluster. The
 * error names the URL with its password masked.
 */
export async function probeRemote(address: RemoteAddress, timeoutMs: number): Promise<{ cluster: boolean }> {
  const store = new RemoteStore({ address, timeoutMs, cluster: false });
  try {
    await store.connect();
    const info = await (store as unknown as { client: Redis }).client.info('cluster');
    return { cluster: /cluster_enabled:1/.test(info) };
  } catch (error) {
    const refusal = store.databaseError();
    if (refusal !== null) throw new RemoteUnavailableError(`remote tier ${address.masked}: ${maskSecrets(refusal.message, address)}`, { cause: error });
    const failed = plainWords(error instanceof Error ? error.message : String(error));
    // "Connection is closed" alone hides the cause the client saw while connecting.
    const cause = store.lastError === null ? null : plainWords(store.lastError);
    const reason = maskSecrets(cause === null || failed.includes(cause) ? failed : `${cause} (${failed})`, address);
    if (TIMEOUT_PATTERN.test(reason)) {
      // Up but slow or far away is not the same as down: say which setting bounds the wait.
      const waited = Math.max(timeoutMs, MIN_CONNECT_TIMEOUT_MS);
      throw new RemoteUnavailableError(
        `remote tier ${address.masked} did not answer within ${waited} ms (${reason}); if it is up but slow or far away, raise --remote-timeout-ms (remoteTimeoutMs)`,
        { cause: error },
      );
    }
    throw new RemoteUnavailableError(`remote tier ${address.masked} is unreachable: ${reason}`, { cause: error });
  } finally {
    await store.close();
  }
}

const TIMEOUT_PATTERN = /timed? ?out|ETIMEDOUT/i;

/** Connecting waits at least this long, however short the command timeout. */
const MIN_CONNECT_TIMEOUT_MS = 1000;

/** The client's own words for a connection that closed with commands pending, in plain ones. */
function plainWords(message: string): string {
  return /max retries per request/i.test(message) ? 'the connection closed before the server answered' : message;
}

function maskSecrets(text: string, address: RemoteAddress): string {
  return address.password ? text.split(address.password).join('***') : text;
}

function classify(error: unknown): RemoteOperationError {
  if (error instanceof RemoteOperationError) return error;
  const message = plainWords(error instanceof Error ? error.message : String(error));
  if (TIMEOUT_PATTERN.test(message)) return new RemoteOperationError('timeout', message);
  if (/writeable|connection|closed|ECONN|EPIPE|socket|offline|ready/i.test(message)) {
    return new RemoteOperationError('connection', message);
  }
  return new RemoteOperationError('server', message);
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RemoteOperationError('timeout', `${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
