/**
 * Error messages quote what the user gave, never raw file content: a quoted
 * value is cut short and anything unprintable (control characters, bytes of
 * a binary file) is escaped, so an error stays one readable line.
 */

/** `text` with control and non-ASCII characters escaped (\n, \u0000...), cut to about `max` characters. */
export function printable(text: string, max = 60): string {
  const escaped = text.replace(/[^\x20-\x7e]/g, (c) => {
    if (c === '\n') return '\\n';
    if (c === '\r') return '\\r';
    if (c === '\t') return '\\t';
    return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  });
  return escaped.length > max ? `${escaped.slice(0, max - 3)}...` : escaped;
}

/**
 * What JSON.parse objected to, without the text it quotes: Node's message
 * ends with the input itself (`Unexpected token 'h', "hello..." is not valid
 * JSON`), which may span lines or hold binary bytes.
 */
export function jsonErrorSummary(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const withoutInput = message.replace(/,\s*"[\s\S]*"\s+is not valid JSON\s*$/, '');
  return printable(withoutInput, 120);
}

/** The text of a file without a leading UTF-8 byte order mark (editors on Windows write one). */
export function withoutBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}
