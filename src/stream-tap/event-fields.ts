// One server-sent event's fields, read from its bytes as the SSE specification reads them: the
// `data` lines joined by LF, the last `event` name, comments and other fields ignored. A field
// named `error` is read too: llama.cpp's in-stream error (`error: {"code":400,...}` after a 200,
// then `data: [DONE]`), which the specification would ignore, but the request failed.
const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;
const DATA = Buffer.from('data');
const EVENT = Buffer.from('event');
const ERROR = Buffer.from('error');

export interface EventFields {
  /** The data, or undefined when the event has no data line (and so dispatches nothing). */
  readonly data: string | undefined;
  /** The event's name (`event:`), undefined when unnamed or empty. */
  readonly name: string | undefined;
  /** A line whose field is `error`. */
  readonly error: boolean;
}

/** The fields of the event whose lines (any line ends) are bytes [start, end) of `b`. */
export function readEventFields(b: Buffer, start: number, end: number): EventFields {
  let data: string | undefined;
  let name: string | undefined;
  let error = false;
  let at = start;
  while (at < end) {
    let eol = at;
    while (eol < end && b[eol] !== LF && b[eol] !== CR) eol++;
    if (eol > at && b[at] !== COLON) {
      let colon = b.indexOf(COLON, at);
      if (colon === -1 || colon > eol) colon = eol;
      let value = colon + 1;
      if (value < eol && b[value] === SPACE) value++;
      if (value > eol) value = eol;
      if (is(b, at, colon, DATA)) {
        const text = b.toString('utf8', value, eol);
        data = data === undefined ? text : `${data}\n${text}`;
      } else if (is(b, at, colon, EVENT)) name = b.toString('utf8', value, eol) || undefined;
      else if (is(b, at, colon, ERROR)) error = true;
    }
    at = eol + (b[eol] === CR && b[eol + 1] === LF ? 2 : 1);
  }
  return { data, name, error };
}

/** Whether bytes [from, to) of `b` are the field name `name`. */
function is(b: Buffer, from: number, to: number, name: Buffer): boolean {
  return to - from === name.length && b.compare(name, 0, name.length, from, to) === 0;
}
