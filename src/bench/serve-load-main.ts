import { text } from 'node:stream/consumers';
import { runLoad, type ServeLoadSpec } from './serve-load.js';

/** Child-process entry of the serve bench's load generator: a ServeLoadSpec as JSON on stdin, the ServeLoadResult as JSON on stdout. */
text(process.stdin)
  .then((input) => runLoad(JSON.parse(input) as ServeLoadSpec))
  .then(
    (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
    (error: unknown) => {
      process.stderr.write(`${(error as Error).message}\n`);
      process.exitCode = 1;
    },
  );
