/** What the content of `<meta http-equiv="refresh">` says. */
export interface DeclarativeRefresh {
  /** Seconds before the refresh (the integer part the steps read). */
  readonly delay: number;
  /** The URL string to navigate to (unresolved), or undefined: the page refreshes itself. */
  readonly url?: string;
}

const isWhitespace = (c: string | undefined) => c === ' ' || c === '\t' || c === '\n' || c === '\f' || c === '\r';
const isDigit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';

/**
 * Parses the content of `<meta http-equiv="refresh" content>` with the HTML Living
 * Standard's shared declarative refresh steps
 * (https://html.spec.whatwg.org/multipage/semantics.html#shared-declarative-refresh-steps):
 * ASCII whitespace, a delay of ASCII digits (digits and `.` after it ignored; `.5` is a
 * delay of 0), then `;`, `,` or whitespace, optional `url` (any case) `=` with whitespace
 * around the `=`, an optional quote that ends the URL at its match. Malformed content
 * (`""`, `"abc"`, `"5x; url=a"`) is ignored: the steps return without a refresh.
 * @param content the attribute's value
 * @returns the delay and URL string, or undefined for malformed or empty content
 */
export function parseDeclarativeRefresh(content: string): DeclarativeRefresh | undefined {
  const input = content;
  if (input === '') return undefined;
  let i = 0;
  const skipWhitespace = () => {
    while (i < input.length && isWhitespace(input[i])) i++;
  };
  skipWhitespace();
  const start = i;
  while (isDigit(input[i])) i++;
  const timeString = input.slice(start, i);
  if (timeString === '' && input[i] !== '.') return undefined;
  const delay = timeString === '' ? 0 : Number.parseInt(timeString, 10);
  while (isDigit(input[i]) || input[i] === '.') i++;
  if (i >= input.length) return { delay };
  if (input[i] !== ';' && input[i] !== ',' && !isWhitespace(input[i])) return undefined;
  skipWhitespace();
  if (input[i] === ';' || input[i] === ',') i++;
  skipWhitespace();
  if (i >= input.length) return { delay };
  let urlString = input.slice(i);
  parse: {
    if (input[i] === 'U' || input[i] === 'u') i++;
    else break parse; // to "skip quotes" below
    if (input[i] === 'R' || input[i] === 'r') i++;
    else return { delay, url: urlString };
    if (input[i] === 'L' || input[i] === 'l') i++;
    else return { delay, url: urlString };
    skipWhitespace();
    if (input[i] === '=') i++;
    else return { delay, url: urlString };
    skipWhitespace();
  }
  let quote = '';
  if (input[i] === '"' || input[i] === "'") {
    quote = input[i]!;
    i++;
  }
  urlString = input.slice(i);
  if (quote !== '') {
    const end = urlString.indexOf(quote);
    if (end >= 0) urlString = urlString.slice(0, end);
  }
  return { delay, url: urlString };
}
