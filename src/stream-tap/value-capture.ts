// The raw bytes of one JSON value the request body scanner keeps as they stream past (the
// `model` string, the `stream_options` value), up to a few hundred bytes: a value within one
// chunk is viewed there, not copied; only one cut by a chunk boundary is copied, part by part.
// Past its cap a value is dropped (reported as undefined), so a body costs no buffer of its own.

export class ValueCapture {
  private parts: Buffer[] | undefined = undefined;
  private length = 0;
  /** Capturing a value now. */
  active = false;
  private readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  begin(): void {
    this.active = true;
    this.parts = undefined;
    this.length = 0;
  }

  /** Bytes [start, end) of `chunk` belong to the value, which goes on in a later chunk. */
  add(chunk: Uint8Array, start: number, end: number): void {
    this.length += end - start;
    if (this.length > this.max) this.parts = undefined;
    else (this.parts ??= []).push(Buffer.from(chunk.subarray(start, end)));
  }

  /** The value ends at `end` of `chunk`: its bytes, or undefined past the cap. */
  finish(chunk: Uint8Array, start: number, end: number): Buffer | undefined {
    this.active = false;
    const parts = this.parts;
    this.parts = undefined;
    if (this.length + end - start > this.max) return undefined;
    const last = Buffer.from(chunk.buffer, chunk.byteOffset + start, end - start);
    return parts === undefined ? last : Buffer.concat([...parts, last]);
  }
}
