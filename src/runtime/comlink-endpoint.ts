import type { Endpoint } from 'comlink';
import type { MessagePort, Worker } from 'node:worker_threads';

type Listener = (event: { data: unknown }) => void;

/**
 * Adapts a worker_threads Worker or MessagePort to comlink's Endpoint, whose
 * listeners expect DOM-style `{ data }` events.
 */
export function threadEndpoint(port: Worker | MessagePort): Endpoint {
  const wrapped = new Map<Listener, (data: unknown) => void>();
  const endpoint = {
    postMessage(message: unknown, transfer?: readonly unknown[]): void {
      port.postMessage(message, transfer as never);
    },
    addEventListener(_type: string, listener: Listener): void {
      const onMessage = (data: unknown): void => listener({ data });
      wrapped.set(listener, onMessage);
      port.on('message', onMessage);
    },
    removeEventListener(_type: string, listener: Listener): void {
      const onMessage = wrapped.get(listener);
      if (!onMessage) return;
      port.off('message', onMessage);
      wrapped.delete(listener);
    },
  };
  return endpoint as unknown as Endpoint;
}
