#!/usr/bin/env node
import { installCliInterrupts } from './interrupt.js';

/**
 * The `kvtier` entry. SIGINT and SIGTERM are handled before the program is
 * loaded (loading it takes a noticeable part of a second), so a Ctrl-C at
 * any moment ends with the interrupted line and exit code 130, never with
 * Node's silent default.
 */
installCliInterrupts();
const { runCli } = await import('./program.js');
runCli(process.argv.slice(2));
