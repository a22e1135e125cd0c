/** One Server-Sent Event as received: its `event:` name (default `'message'`) and `data:` text. */
export interface ServerSentEvent {
  readonly event: string;
  /** The `data:` lines joined with `\n`. */
  readonly data: string;
}

/**
 * Parses a `text/event-stream` body (the WHATWG event-stream format, as served by `GET /events`)
 * into events, for clients that are not browsers (`shardflow tree --watch`). Comments (`:`
 * lines), `id:` and `retry:` fields are skipped; an event without `data:` lines is not
 * dispatched, as in `EventSource`. Ends when `body` ends; a partial event at the end is dropped.
 *
 * @param body the response body, e.g. `(await fetch(url)).body`
 * @throws (the iteration rejects with) the stream's error, e.g. the connection dropped
 */
export async function* readEventStream(body: AsyncIterable<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let data: string[] = [];
  /** Handles one complete line; returns the event it completes, if any. */
  const line = (text: string): ServerSentEvent | undefined => {
    if (text === '') {
      const done = data.length > 0 ? { event: event === '' ? 'message' : event, data: data.join('\n') } : undefined;
      event = '';
      data = [];
      return done;
    }
    if (text.startsWith(':')) return undefined;
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
    return undefined;
  };
  /** Splits complete lines off `buffer`; at the end of the stream a trailing '\r' ends a line too. */
  function* lines(final: boolean): Generator<ServerSentEvent> {
    let newline: number;
    while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
      // A '\r' at the end of the buffer may be the first half of '\r\n': wait for more bytes.
      if (!final && buffer[newline] === '\r' && newline + 1 === buffer.length) return;
      const text = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
      const done = line(text);
      if (done !== undefined) yield done;
    }
  }
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    yield* lines(false);
  }
  buffer += decoder.decode();
  yield* lines(true);
}
