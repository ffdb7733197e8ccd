// Reads `model` and `stream` from a JSON request body as its bytes stream past, without
// building the document: a single pass over bytes with a few integers of state, so a
// multi-megabyte prompt costs one linear scan and no allocation, and never blocks the
// event loop the way JSON.parse of the whole body would. Only the top-level object is
// understood; nested values are skipped by bracket and string tracking.

export type ScanResult =
  | {
      readonly ok: true;
      readonly model: string | undefined;
      readonly stream: boolean | undefined;
      /** Byte offset of the top-level object's '{'. */
      readonly objectStart: number;
      /** Where the top-level `stream_options` value lies (bytes [start, end)), when there is one. */
      readonly streamOptions: { readonly start: number; readonly end: number; readonly isObject: boolean } | undefined;
    }
  | { readonly ok: false; readonly reason: 'empty' | 'invalid_json' | 'not_object' };

export interface BodyScanner {
  feed(chunk: Uint8Array): void;
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

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MAX_KEY = 16; // longest key of interest ("stream_options") plus room; longer keys are skipped
const MAX_MODEL = 512; // bytes of a model name kept; a longer one is reported as absent

const K_OTHER = 0;
const K_MODEL = 1;
const K_STREAM = 2;
const K_STREAM_OPTIONS = 3;

export function createBodyScanner(): BodyScanner {
  let state = START;
  let escaped = false;
  let nestedDepth = 0;
  let nestedInString = false;
  let notObject = false;
  const keyBuf = new Uint8Array(MAX_KEY);
  let keyLen = 0;
  let key = K_OTHER;
  const modelBuf = new Uint8Array(MAX_MODEL);
  let modelLen = 0;
  let modelOverflow = false;
  let capturingModel = false;
  let primitive = '';
  let model: string | undefined;
  let stream: boolean | undefined;
  let offset = 0; // bytes of earlier chunks
  let objectStart = -1;
  let optionsStart = -1;
  let streamOptions: { start: number; end: number; isObject: boolean } | undefined;
  let optionsIsObject = false;

  function finishKey(): void {
    key = K_OTHER;
    if (keyLen === 5 && keyBuf[0] === 0x6d && keyBuf[1] === 0x6f && keyBuf[2] === 0x64 && keyBuf[3] === 0x65 && keyBuf[4] === 0x6c) {
      key = K_MODEL; // "model"
    } else if (
      keyLen === 6 &&
      keyBuf[0] === 0x73 && keyBuf[1] === 0x74 && keyBuf[2] === 0x72 && keyBuf[3] === 0x65 && keyBuf[4] === 0x61 && keyBuf[5] === 0x6d
    ) {
      key = K_STREAM; // "stream"
    } else if (keyLen === 14 && String.fromCharCode(...keyBuf.subarray(0, 14)) === 'stream_options') {
      key = K_STREAM_OPTIONS;
    }
  }

  function finishPrimitive(): void {
    if (key === K_STREAM) stream = primitive === 'true' ? true : primitive === 'false' ? false : undefined;
    else if (key === K_MODEL) model = undefined;
    primitive = '';
  }

  function finishModel(): void {
    capturingModel = false;
    if (modelOverflow) {
      model = undefined;
      return;
    }
    try {
      // The raw bytes are a JSON string body; let JSON decode its escapes.
      model = JSON.parse(`"${Buffer.from(modelBuf.buffer, 0, modelLen).toString('utf8')}"`) as string;
    } catch {
      model = undefined;
    }
  }

  function feed(chunk: Uint8Array): void {
    const n = chunk.length;
    let i = 0;
    while (i < n && state !== ERROR) {
      const c = chunk[i]!;
      switch (state) {
        case NESTED:
          // Hot loop for the bulk of a body (messages, tools): strings and brackets only.
          for (; i < n; i++) {
            const b = chunk[i]!;
            if (nestedInString) {
              if (escaped) escaped = false;
              else if (b === BACKSLASH) escaped = true;
              else if (b === QUOTE) nestedInString = false;
            } else if (b === QUOTE) nestedInString = true;
            else if (b === 0x7b || b === 0x5b) nestedDepth++;
            else if (b === 0x7d || b === 0x5d) {
              if (--nestedDepth === 0) {
                state = AFTER_VALUE;
                i++;
                if (key === K_STREAM_OPTIONS) streamOptions = { start: optionsStart, end: offset + i, isObject: optionsIsObject };
                break;
              }
            }
          }
          continue;
        case STRING:
          for (; i < n; i++) {
            const b = chunk[i]!;
            if (escaped) escaped = false;
            else if (b === BACKSLASH) escaped = true;
            else if (b === QUOTE) {
              if (capturingModel) finishModel();
              if (key === K_STREAM_OPTIONS) streamOptions = { start: optionsStart, end: offset + i + 1, isObject: false };
              state = AFTER_VALUE;
              i++;
              break;
            }
            if (capturingModel) {
              if (modelLen < MAX_MODEL) modelBuf[modelLen++] = b;
              else modelOverflow = true;
            }
          }
          continue;
        case KEY:
          if (escaped) escaped = false;
          else if (c === BACKSLASH) escaped = true;
          else if (c === QUOTE) {
            finishKey();
            state = COLON;
            break;
          }
          if (keyLen < MAX_KEY) keyBuf[keyLen] = c;
          keyLen++;
          break;
        case START:
          if (c === 0x7b) {
            state = FIRST_KEY;
            objectStart = offset + i;
          }
          else if (!isSpace(c)) {
            notObject = true;
            state = ERROR;
          }
          break;
        case FIRST_KEY:
        case NEXT_KEY:
          if (c === QUOTE) {
            state = KEY;
            keyLen = 0;
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
            if (key === K_MODEL) {
              capturingModel = true;
              modelLen = 0;
              modelOverflow = false;
            } else if (key === K_STREAM) stream = undefined;
          } else if (c === 0x7b || c === 0x5b) {
            state = NESTED;
            nestedDepth = 1;
            nestedInString = false;
            if (key === K_MODEL) model = undefined;
            else if (key === K_STREAM) stream = undefined;
            else if (key === K_STREAM_OPTIONS) {
              optionsStart = offset + i;
              optionsIsObject = c === 0x7b;
            }
          } else if (isPrimitiveByte(c)) {
            state = PRIMITIVE;
            primitive = String.fromCharCode(c);
            if (key === K_STREAM_OPTIONS) optionsStart = offset + i;
          } else state = ERROR;
          if (key === K_STREAM_OPTIONS && c === QUOTE) optionsStart = offset + i;
          break;
        case PRIMITIVE:
          if (isPrimitiveByte(c)) {
            if (primitive.length < 8) primitive += String.fromCharCode(c);
          } else {
            if (key === K_STREAM_OPTIONS) streamOptions = { start: optionsStart, end: offset + i, isObject: false };
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
    offset += n;
  }

  function end(): ScanResult {
    if (state === DONE) return { ok: true, model, stream, objectStart, streamOptions };
    if (state === START) return { ok: false, reason: 'empty' };
    return { ok: false, reason: notObject ? 'not_object' : 'invalid_json' };
  }

  return { feed, end };
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function isPrimitiveByte(c: number): boolean {
  // digits, sign, point, exponent and the letters of true/false/null
  return (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || (c >= 0x61 && c <= 0x7a) || c === 0x45;
}
