// The chunked framing of an upstream body, read on the side from the socket's reads, once Node's
// parser no longer hands the body's slices over (upstream-body.ts, skipBodySlices): the chunks'
// bytes as views of each read (no copy), and whether a read is whole chunks as the upstream sent
// them (so it can go on as it came). Node's parser still parses every read, and its rules stand:
// an error there ends the response, and the end it finds is the end. This reader is only as strict
// as it must be to find the bytes: a size line ends at its LF (CR and an extension before it are
// skipped), a chunk's CRLF may be a lone LF. A size's leading zeros are skipped, as llhttp skips
// them (any number of them: valid HTTP); a size past 16 significant hex digits overflows llhttp's
// uint64, which Node answers with an error: nothing after it is read here either.
import { hexValue } from '../stream-tap/json-bytes.ts';

const LF = 0x0a;
const CR = 0x0d;
// Where the next byte is: in a size line's digits, after them (an extension, spaces, a CR),
// in a chunk's bytes, at its CR or LF after them, or after the last chunk (the trailers, the end).
const SIZE = 0;
const SIZE_REST = 1;
const DATA = 2;
const DATA_CR = 3;
const DATA_LF = 4;
const DONE = 5;
/** Significant hex digits of the largest size llhttp takes (a uint64). */
const MAX_DIGITS = 16;

export class ChunkDecoder {
  #state = SIZE;
  #size = 0;
  /** Digits of the size line read so far, leading zeros included. */
  #digits = 0;
  /** Its digits from the first that is not a zero. */
  #significant = 0;
  #left = 0;

  /**
   * Hands the chunks' bytes in `read` to `slice`, each run as a view of it; true when the read
   * began and ended between two chunks and held no last chunk: it is whole chunks, as they came.
   */
  feed(read: Buffer, slice: (bytes: Buffer) => void): boolean {
    const began = this.#state === SIZE && this.#digits === 0;
    const n = read.length;
    let i = 0;
    while (i < n) {
      const c = read[i]!;
      switch (this.#state) {
        case SIZE: {
          const d = hexValue(c);
          if (d !== -1) {
            if (this.#size !== 0 || d !== 0) this.#significant++;
            // Node's parser errs on this size and ends the response: the rest is not chunks.
            if (this.#significant > MAX_DIGITS) {
              this.#state = DONE;
              return false;
            }
            this.#size = this.#size * 16 + d;
            this.#digits++;
            i++;
            break;
          }
          this.#state = SIZE_REST;
          break;
        }
        case SIZE_REST:
          i++;
          if (c !== LF) break;
          this.#digits = 0;
          this.#significant = 0;
          this.#left = this.#size;
          this.#size = 0;
          this.#state = this.#left === 0 ? DONE : DATA;
          break;
        case DATA: {
          const take = Math.min(this.#left, n - i);
          slice(read.subarray(i, i + take));
          i += take;
          this.#left -= take;
          if (this.#left === 0) this.#state = DATA_CR;
          break;
        }
        case DATA_CR:
          if (c === CR) {
            i++;
            this.#state = DATA_LF;
          } else {
            if (c === LF) i++;
            this.#state = SIZE;
          }
          break;
        case DATA_LF:
          if (c === LF) i++;
          this.#state = SIZE;
          break;
        default:
          return false; // after the last chunk: the trailers and the end are the parser's
      }
    }
    return began && this.#state === SIZE && this.#digits === 0;
  }
}
