// Reads `model`, `stream`, the generation limit (`max_completion_tokens`, `max_tokens` or
// `max_output_tokens`) and `n` from a JSON request body as its bytes stream past, without
// building the document: a single pass over bytes with a few integers of state, so a
// multi-megabyte prompt costs one linear scan and no allocation, and never blocks the
// event loop the way JSON.parse of the whole body would. Only the top-level object is
// understood; nested values are skipped by bracket tracking, strings by a search for their end.
//
// The body is read as the engines read it (Python's json under vLLM and SGLang, JSON.parse):
// escapes in keys are decoded (`"str\u0065am"` is `stream`), the last of duplicate keys wins,
// a UTF-8 byte order mark is skipped (Python's json.loads skips it), NaN and Infinity are values
// (Python takes them), and `stream` is read as pydantic's lax bool reads it (`1`, `"true"`,
// `"yes"`, `"on"` ... stream), so that no spelling streams for the engine and not for infermeter.
// JSON's bytes, strings, nested values, counts and pydantic's bool are read by the one JSON byte
// module (src/json-bytes/), as the response skimmer reads them; this file is the walk of the
// top-level object, its state kept across chunks.
// Over 300 lines: one state machine whose states share a few integers of state in one closure,
// the request's hot loop.

import { BACKSLASH, ESCAPES, hexValue, isPrimitiveByte, isSpace, keyIs, QUOTE } from '../json-bytes/bytes.ts';
import { addDigit, laxBool, MAX_STREAM_TEXT, NO_DIGIT } from '../json-bytes/scalars.ts';
import { ESCAPED_AT_END, jsonStringText, stringEnd } from '../json-bytes/strings.ts';
import { NestedValue } from '../json-bytes/values.ts';
import { ValueCapture } from './value-capture.ts';

export type ScanResult =
  | {
      readonly ok: true;
      readonly model: string | undefined;
      readonly stream: boolean | undefined;
      /** Requested generation limit: `max_completion_tokens`, else `max_tokens`, else `max_output_tokens` (Responses API). */
      readonly maxTokens: number | undefined;
      /** Requested number of choices (`n`). */
      readonly n: number | undefined;
      /** Byte offset of the top-level object's '{'. */
      readonly objectStart: number;
      /**
       * Where the top-level `stream_options` value lies (bytes [start, end)), when there is one,
       * and its text when it is at most MAX_OPTIONS bytes (a body streamed through is injected
       * from it: its bytes are gone by then).
       */
      readonly streamOptions: StreamOptions | undefined;
    }
  | { readonly ok: false; readonly reason: 'empty' | 'invalid_json' | 'not_object' };

interface StreamOptions {
  readonly start: number;
  readonly end: number;
  readonly isObject: boolean;
  readonly text: string | undefined;
}

export interface BodyScanner {
  feed(chunk: Uint8Array): void;
  /** The top-level object has closed, with nothing but white space after it so far. */
  done(): boolean;
  end(): ScanResult;
}

// States of the top-level walk.
const START = 0; // before the top-level value
const FIRST_KEY = 1; // just after '{': a key or '}'
const KEY = 2; // inside a key string
const COLON = 3; // after a key
const VALUE = 4; // expecting a value
const STRING = 5; // inside a top-level string value
const PRIMITIVE = 6; // inside a number or literal
const NESTED = 7; // inside an object or array below the top level
const AFTER_VALUE = 8; // expecting ',' or '}'
const NEXT_KEY = 9; // after ',': a key
const DONE = 10; // after the closing '}'
const ERROR = 11;

const MAX_KEY = 24; // longest key of interest ("max_completion_tokens", 21) plus room; longer keys are skipped
const MAX_MODEL = 512; // bytes of a model name kept; a longer one is reported as absent
const MAX_OPTIONS = 1024; // bytes of a stream_options value kept; a longer one has no text

const K_OTHER = 0;
const K_MODEL = 1;
const K_STREAM = 2;
const K_STREAM_OPTIONS = 3;
const K_MAX_COMPLETION_TOKENS = 4;
const K_MAX_TOKENS = 5;
const K_MAX_OUTPUT_TOKENS = 6;
const K_N = 7;
// Key bytes by K_ code, compared with a key's decoded bytes (a non-ASCII character, which no
// name here holds, is kept as 0xff).
const KEY_BYTES = ['', 'model', 'stream', 'stream_options', 'max_completion_tokens', 'max_tokens', 'max_output_tokens', 'n'].map((k) =>
  Buffer.from(k, 'latin1'),
);
const MAX_INT = 0x7fffffff; // larger counts are not credible requests; treated as absent
const BOM = [0xef, 0xbb, 0xbf];

export function createBodyScanner(): BodyScanner {
  let state = START;
  let escaped = false; // in a string or key, the last byte was a backslash that escapes the next
  const nested = new NestedValue();
  let notObject = false;
  const keyBuf = new Uint8Array(MAX_KEY);
  let keyLen = 0;
  // A key's \uXXXX escape: hex digits still to come, and the code unit so far.
  let unicodeLeft = 0;
  let unicode = 0;
  let bom = 0; // bytes of a leading byte order mark seen
  let streamText = ''; // a `stream` string's raw text, up to MAX_STREAM_TEXT
  let key = K_OTHER;
  // A model name is decoded from the chunk it lies in (value-capture.ts); so is stream_options.
  const modelBytes = new ValueCapture(MAX_MODEL);
  const optionsBytes = new ValueCapture(MAX_OPTIONS);
  let optionsFrom = 0; // where the stream_options value being captured begins in the current chunk
  let primitive = '';
  let model: string | undefined;
  let stream: boolean | undefined;
  // Integers are accumulated as digits arrive, so no text is kept for them.
  let int = NO_DIGIT;
  let maxCompletionTokens: number | undefined;
  let maxTokens: number | undefined;
  let maxOutputTokens: number | undefined;
  let choices: number | undefined;
  let offset = 0; // bytes of earlier chunks
  let objectStart = -1;
  let optionsStart = -1;
  let streamOptions: StreamOptions | undefined;
  let optionsIsObject = false;

  function finishKey(): void {
    key = K_OTHER;
    // keyIs compares lengths first: a key longer than keyBuf is none of these.
    for (let k = 1; k < KEY_BYTES.length; k++) {
      if (keyIs(keyBuf, 0, keyLen, KEY_BYTES[k]!)) {
        key = k;
        return;
      }
    }
  }

  function isIntKey(): boolean {
    return key >= K_MAX_COMPLETION_TOKENS && key <= K_N;
  }

  // Sets the current integer key's field; undefined when its value is of any other kind, so a
  // later duplicate overrides an earlier one as with JSON.parse.
  function setInt(value: number | undefined): void {
    if (key === K_MAX_COMPLETION_TOKENS) maxCompletionTokens = value;
    else if (key === K_MAX_TOKENS) maxTokens = value;
    else if (key === K_MAX_OUTPUT_TOKENS) maxOutputTokens = value;
    else if (key === K_N) choices = value !== undefined && value >= 1 ? value : undefined;
  }

  function keyByte(b: number): void {
    if (keyLen < MAX_KEY) keyBuf[keyLen] = b;
    keyLen++;
  }

  function finishPrimitive(): void {
    if (key === K_STREAM) stream = laxBool(primitive, false);
    else if (key === K_MODEL) model = undefined;
    else if (isIntKey()) setInt(int >= 0 ? int : undefined);
    primitive = '';
  }

  function finishModel(chunk: Uint8Array, start: number, end: number): void {
    const bytes = modelBytes.finish(chunk, start, end);
    model = bytes === undefined ? undefined : jsonStringText(bytes);
  }

  // The stream_options value ends at `end` of `chunk` (a primitive's at the byte after it).
  function finishOptions(chunk: Uint8Array, end: number, isObject: boolean): void {
    const text = optionsBytes.finish(chunk, optionsFrom, end)?.toString('utf8');
    streamOptions = { start: optionsStart, end: offset + end, isObject, text };
  }

  function feed(chunk: Uint8Array): void {
    const n = chunk.length;
    let i = 0;
    while (i < n && state !== ERROR) {
      const c = chunk[i]!;
      switch (state) {
        case NESTED: {
          // The bulk of a body (messages, tools): crossed by its brackets, each string by a
          // search for its end (values.ts).
          const past = nested.cross(chunk, i, n);
          if (past < 0) {
            i = n;
            continue;
          }
          i = past;
          state = AFTER_VALUE;
          if (key === K_STREAM_OPTIONS) finishOptions(chunk, i, optionsIsObject);
          continue;
        }
        case STRING: {
          const start = i;
          const q = stringEnd(chunk, i, n, escaped);
          escaped = q === ESCAPED_AT_END;
          if (q < 0) {
            i = n;
            if (modelBytes.active) modelBytes.add(chunk, start, n);
            if (key === K_STREAM) keepStreamText(chunk, start, n);
            continue;
          }
          i = q;
          if (modelBytes.active) finishModel(chunk, start, i);
          if (key === K_STREAM) {
            keepStreamText(chunk, start, i);
            stream = laxBool(streamText, true);
          }
          if (key === K_STREAM_OPTIONS) finishOptions(chunk, i + 1, false);
          state = AFTER_VALUE;
          i++;
          continue;
        }
        case KEY:
          // Decoded as it comes: the key as the engine's parser sees it.
          if (unicodeLeft > 0) {
            const h = hexValue(c);
            if (h < 0) state = ERROR;
            else {
              unicode = unicode * 16 + h;
              if (--unicodeLeft === 0) keyByte(unicode < 0x80 ? unicode : 0xff);
            }
          } else if (escaped) {
            escaped = false;
            if (c === 0x75) {
              unicodeLeft = 4;
              unicode = 0;
            } else {
              const decoded = c < 0x80 ? ESCAPES[c]! : 0;
              if (decoded === 0) state = ERROR;
              else keyByte(decoded);
            }
          } else if (c === BACKSLASH) escaped = true;
          else if (c === QUOTE) {
            finishKey();
            state = COLON;
          } else if (c < 0x20) state = ERROR;
          else keyByte(c);
          break;
        case START:
          if (bom < 3 && offset + i === bom && c === BOM[bom]) bom++;
          else if (bom !== 0 && bom < 3) {
            notObject = true;
            state = ERROR;
          } else if (c === 0x7b) {
            state = FIRST_KEY;
            objectStart = offset + i;
          } else if (!isSpace(c)) {
            notObject = true;
            state = ERROR;
          }
          break;
        case FIRST_KEY:
        case NEXT_KEY:
          if (c === QUOTE) {
            state = KEY;
            keyLen = 0;
            unicodeLeft = 0;
          } else if (c === 0x7d && state === FIRST_KEY) state = DONE;
          else if (!isSpace(c)) state = ERROR;
          break;
        case COLON:
          if (c === 0x3a) state = VALUE;
          else if (!isSpace(c)) state = ERROR;
          break;
        case VALUE:
          if (isSpace(c)) break;
          if (c === QUOTE) {
            state = STRING;
            if (key === K_MODEL) modelBytes.begin();
            else if (key === K_STREAM) {
              stream = undefined;
              streamText = '';
            } else if (isIntKey()) setInt(undefined);
          } else if (c === 0x7b || c === 0x5b) {
            state = NESTED;
            nested.open();
            if (key === K_MODEL) model = undefined;
            else if (key === K_STREAM) stream = undefined;
            else if (isIntKey()) setInt(undefined);
            else if (key === K_STREAM_OPTIONS) {
              optionsStart = offset + i;
              optionsIsObject = c === 0x7b;
            }
          } else if (isPrimitiveByte(c)) {
            state = PRIMITIVE;
            // Only `stream` needs the literal's text; other primitives cost no string building.
            primitive = key === K_STREAM ? String.fromCharCode(c) : '';
            int = addDigit(NO_DIGIT, c, MAX_INT); // a sign, point or letter first is never a count
            if (key === K_STREAM_OPTIONS) optionsStart = offset + i;
          } else state = ERROR;
          if (key === K_STREAM_OPTIONS) {
            if (c === QUOTE) optionsStart = offset + i;
            optionsBytes.begin();
            optionsFrom = i;
          }
          break;
        case PRIMITIVE:
          if (isPrimitiveByte(c)) {
            if (key === K_STREAM) {
              if (primitive.length <= MAX_STREAM_TEXT) primitive += String.fromCharCode(c);
            } else if (int >= 0) int = addDigit(int, c, MAX_INT);
          } else {
            if (key === K_STREAM_OPTIONS) finishOptions(chunk, i, false);
            finishPrimitive();
            state = AFTER_VALUE;
            continue; // re-read this byte as a separator
          }
          break;
        case AFTER_VALUE:
          if (c === 0x2c) state = NEXT_KEY;
          else if (c === 0x7d) state = DONE;
          else if (!isSpace(c)) state = ERROR;
          break;
        case DONE:
          if (!isSpace(c)) state = ERROR;
          break;
      }
      i++;
    }
    // A stream_options value that goes on in the next chunk: what this one held of it.
    if (optionsBytes.active && state !== ERROR) optionsBytes.add(chunk, optionsFrom, n);
    optionsFrom = 0;
    offset += n;
  }

  function keepStreamText(chunk: Uint8Array, start: number, end: number): void {
    if (streamText.length > MAX_STREAM_TEXT) return;
    for (let j = start; j < end && streamText.length <= MAX_STREAM_TEXT; j++) streamText += String.fromCharCode(chunk[j]!);
  }

  function end(): ScanResult {
    if (state === DONE) {
      // The newer chat name wins over the older one, and both over the Responses API's.
      const limit = maxCompletionTokens ?? maxTokens ?? maxOutputTokens;
      return { ok: true, model, stream, maxTokens: limit, n: choices, objectStart, streamOptions };
    }
    if (state === START) return { ok: false, reason: 'empty' };
    return { ok: false, reason: notObject ? 'not_object' : 'invalid_json' };
  }

  return { feed, end, done: () => state === DONE };
}

/** The scan of a whole body in memory. */
export function scanWhole(body: Uint8Array): ScanResult {
  const scanner = createBodyScanner();
  scanner.feed(body);
  return scanner.end();
}
