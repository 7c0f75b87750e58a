/**
 * What an assembly opened so far, closed in reverse order when a later step
 * fails (or when the assembled parts are closed). A close that fails does
 * not stop the others: the error that stopped the assembly is the one the
 * caller needs to see.
 */
export class Closers {
  private readonly closers: (() => Promise<void>)[] = [];

  add(close: () => Promise<void>): void {
    this.closers.push(close);
  }

  /** Closes everything added, newest first; returns the errors the closes threw. */
  async closeAll(): Promise<unknown[]> {
    const errors: unknown[] = [];
    while (this.closers.length > 0) {
      const close = this.closers.pop()!;
      try {
        await close();
      } catch (error) {
        errors.push(error);
      }
    }
    return errors;
  }

  /**
   * Runs `build`; if it throws, closes what was opened so far and rethrows
   * its error (a failed close is attached to it as `suppressed`).
   */
  async orClose<T>(build: () => Promise<T> | T): Promise<T> {
    try {
      return await build();
    } catch (error) {
      const failures = await this.closeAll();
      if (failures.length > 0 && error !== null && typeof error === 'object' && !('suppressed' in error)) {
        Object.defineProperty(error, 'suppressed', { value: failures, enumerable: false });
      }
      throw error;
    }
  }
}
