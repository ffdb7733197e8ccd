// The team's own recorded streams (fixtures/streams), shaped after each engine's documented
// format: which events carry tokens, which usage counts, at any chunking.
import { describe, it } from 'node:test';
import { ownStreams } from '../helpers/fixtures.ts';
import { checkEventByEvent, checkRechunked } from './stream-checks.ts';

describe('own recorded streams', () => {
  for (const fixture of ownStreams()) {
    it(`${fixture.name}: classified event by event`, () => {
      checkEventByEvent(fixture.api, fixture.bytes, fixture.expect, fixture.name);
    });
    it(`${fixture.name}: same figures at random chunk boundaries`, () => {
      checkRechunked(fixture.api, fixture.bytes, fixture.expect, fixture.name);
    });
  }
});
