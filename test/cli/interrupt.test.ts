import { describe, expect, it } from 'vitest';
import { RunInterrupts, type InterruptSignal } from '../../src/cli/interrupt.js';

/**
 * What a run does on SIGINT/SIGTERM, seen through the lines it writes and
 * the exit it asks for (no real signal is sent: deliver() is what the
 * installed handler calls).
 */

interface Recorded {
  readonly interrupts: RunInterrupts;
  readonly lines: string[];
  readonly exits: number[];
  readonly order: string[];
}

function recorded(): Recorded {
  const lines: string[] = [];
  const exits: number[] = [];
  const order: string[] = [];
  const interrupts = new RunInterrupts({
    exit: (code) => {
      exits.push(code);
      order.push(`exit ${code}`);
    },
    write: (line) => {
      lines.push(line);
      order.push('line');
    },
  });
  return { interrupts, lines, exits, order };
}

/** A cleanup that settles only when the test says so. */
function pendingCleanup(): { readonly cleanup: () => Promise<void>; readonly finish: () => void; readonly started: Promise<void> } {
  let finish = (): void => undefined;
  let begin = (): void => undefined;
  const started = new Promise<void>((resolve) => (begin = resolve));
  const cleanup = (): Promise<void> => {
    begin();
    return new Promise<void>((resolve) => (finish = resolve));
  };
  return { cleanup, finish: () => finish(), started };
}

describe('run interrupts', () => {
  it.each([
    ['SIGINT', 130, 'Ctrl-C'],
    ['SIGTERM', 143, 'SIGTERM'],
  ] as const)('%s says so at once, stops the ranks, then exits %i', async (signal: InterruptSignal, code, again) => {
    const { interrupts, lines, exits, order } = recorded();
    const stop = pendingCleanup();
    interrupts.onInterrupt(stop.cleanup);
    const delivered = interrupts.deliver(signal);
    await stop.started;
    // The line is out while the ranks are still stopping; the exit waits for them.
    expect(lines).toEqual([`kvtier: interrupted by ${signal}: stopping the ranks, no report is written (${again} again exits at once)\n`]);
    expect(exits).toEqual([]);
    stop.finish();
    await delivered;
    expect(exits).toEqual([code]);
    expect(order).toEqual(['line', `exit ${code}`]);
    expect(interrupts.interrupted).toBe(true);
  });

  it('a second Ctrl-C while the ranks are being stopped exits at once with its own line', async () => {
    const { interrupts, lines, exits } = recorded();
    const stop = pendingCleanup();
    interrupts.onInterrupt(stop.cleanup);
    void interrupts.deliver('SIGINT');
    await stop.started;
    await interrupts.deliver('SIGINT');
    expect(exits).toEqual([130]);
    expect(lines[1]).toBe('kvtier: interrupted again by SIGINT: exiting without waiting for the ranks to stop\n');
  });

  it('a signal before the run registered anything to stop exits at once, saying nothing was written', async () => {
    const { interrupts, lines, exits } = recorded();
    await interrupts.deliver('SIGINT');
    expect(lines).toEqual(['kvtier: interrupted by SIGINT before the run started: nothing was written\n']);
    expect(exits).toEqual([130]);
  });

  it('cleanups run latest first, a failing one does not stop the others, and a forgotten one does not run', async () => {
    const { interrupts, exits } = recorded();
    const ran: string[] = [];
    interrupts.onInterrupt(() => void ran.push('engine'));
    const forget = interrupts.onInterrupt(() => void ran.push('startup'));
    interrupts.onInterrupt(() => {
      ran.push('progress');
      throw new Error('terminal gone');
    });
    forget();
    await interrupts.deliver('SIGTERM');
    expect(ran).toEqual(['progress', 'engine']);
    expect(exits).toEqual([143]);
  });
});
