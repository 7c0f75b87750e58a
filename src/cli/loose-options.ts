import { UsageError } from './usage-error.js';

/**
 * Options of a command whose flags are defined by its handler (`kvtier
 * bench <kind>`): "--name value", "--name=value" and bare "--flag" (true)
 * become { name: 'value', flag: true }, with kebab-case names in camelCase.
 * The handler validates the values.
 */
export function parseLooseOptions(args: readonly string[]): Record<string, string | boolean> {
  const options: Record<string, string | boolean> = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const match = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/i.exec(arg);
    if (match === null) throw new UsageError(`unexpected argument "${arg}" (options look like --name value)`);
    const name = match[1].replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
    if (match[2] !== undefined) {
      options[name] = match[2];
    } else if (i + 1 < args.length && !args[i + 1].startsWith('--')) {
      options[name] = args[++i];
    } else {
      options[name] = true;
    }
  }
  return options;
}
