// The data plane's chunk-size reader imports hexValue from here; the JSON byte module is
// src/json-bytes/ (its imports move there with the data plane's move to undici).
export { hexValue } from '../json-bytes/bytes.ts';
