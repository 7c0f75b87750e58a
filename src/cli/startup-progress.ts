/**
 * Opening the ranks' devices can take a while (a large CPU tier is pinned
 * page by page), and a rank that hangs there is only declared dead at the
 * start deadline. While ranks are still opening after a moment, a line (on
 * stderr, beside the run's progress line) says how many are ready and how
 * long they may take.
 */

/** Quiet for a quick start; then a line every few seconds. */
const FIRST_LINE_MS = 2_000;
const LINE_EVERY_MS = 5_000;

export class StartupProgress {
  private ready = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly startMs = performance.now();

  constructor(
    private readonly ranks: number,
    private readonly startDeadlineMs: number,
    /** Which run of several this is (`--compare`), named at the start of the line; null: the only one. */
    private readonly label: string | null = null,
    private readonly stream: NodeJS.WritableStream = process.stderr,
  ) {}

  start(): void {
    this.timer = setTimeout(() => this.print(), FIRST_LINE_MS);
    this.timer.unref();
  }

  rankOpened(): void {
    this.ready += 1;
  }

  stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private print(): void {
    if (this.ready >= this.ranks) return;
    const seconds = ((performance.now() - this.startMs) / 1000).toFixed(1);
    this.stream.write(
      `${this.label === null ? '' : `[${this.label}] `}opening the ranks' devices: ${this.ready}/${this.ranks} ready after ${seconds} s ` +
        `(a rank not ready within --start-deadline-ms ${this.startDeadlineMs} is declared dead)\n`,
    );
    this.timer = setTimeout(() => this.print(), LINE_EVERY_MS);
    this.timer.unref();
  }
}
