/**
 * The client library (iovalkey) prints a few warnings itself with
 * console.warn, e.g. "[WARN] Redis server does not require a password, but a
 * password was supplied.": raw lines on stderr that ignore the log level and
 * break JSON logs. Once routed, those lines (recognised by their prefixes) go
 * to the given sink instead, each distinct message once; everything else
 * passes through untouched.
 */

const CLIENT_PREFIXES = ['[WARN] ', '[ERROR] The server returned'];

type Sink = (message: string) => void;

let sink: Sink | null = null;
let installed = false;
const seen = new Set<string>();

/**
 * Keeps the client's own warnings in this thread off stderr, where nothing
 * routed them yet (a rank thread: the scheduler side's connection to the same
 * server met the same conditions and logged them). In a thread that already
 * routes them (ranks simulated in the engine's thread), nothing changes.
 */
export function quietClientWarnings(): void {
  if (!installed) routeClientWarnings(() => {});
}

/** Sends the client's own warnings in this thread to `to` (the latest call wins). */
export function routeClientWarnings(to: Sink): void {
  sink = to;
  if (installed) return;
  installed = true;
  const original = console.warn.bind(console);
  console.warn = (...args: unknown[]): void => {
    const first = args[0];
    if (typeof first === 'string' && CLIENT_PREFIXES.some((prefix) => first.startsWith(prefix))) {
      const message = first.replace(/^\[(WARN|ERROR)\] /, '');
      if (seen.has(message)) return;
      seen.add(message);
      sink?.(message);
      return;
    }
    original(...args);
  };
}
